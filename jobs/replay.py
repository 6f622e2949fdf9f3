"""spark-submit entry point: `lbreplay replay` with the same flags (see `lbreplay replay --help`)."""

import sys

from lbreplay.cli import main

if __name__ == "__main__":
    sys.argv = [sys.argv[0], "replay", *sys.argv[1:]]
    main()

"""spark-submit entry point: `lbreplay generate` with the same flags (see `lbreplay generate --help`)."""

import sys

from lbreplay.cli import main

if __name__ == "__main__":
    sys.argv = [sys.argv[0], "generate", *sys.argv[1:]]
    main()

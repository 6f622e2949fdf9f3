"""spark-submit entry point: `lbreplay validate` with the same flags (see `lbreplay validate --help`)."""

import sys

from lbreplay.cli import main

if __name__ == "__main__":
    sys.argv = [sys.argv[0], "validate", *sys.argv[1:]]
    main()

"""spark-submit entry point: `lbreplay demo` with the same flags (see `lbreplay demo --help`)."""

import sys

from lbreplay.cli import main

if __name__ == "__main__":
    sys.argv = [sys.argv[0], "demo", *sys.argv[1:]]
    main()

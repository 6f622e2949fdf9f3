"""spark-submit entry point: `lbreplay sweep` with the same flags (see `lbreplay sweep --help`)."""

import sys

from lbreplay.cli import main

if __name__ == "__main__":
    sys.argv = [sys.argv[0], "sweep", *sys.argv[1:]]
    main()

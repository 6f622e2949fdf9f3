"""spark-submit entry point: `lbreplay sql` with the same flags (see `lbreplay sql --help`)."""

import sys

from lbreplay.cli import main

if __name__ == "__main__":
    sys.argv = [sys.argv[0], "sql", *sys.argv[1:]]
    main()

"""spark-submit entry point: `lbreplay report` with the same flags (see `lbreplay report --help`)."""

import sys

from lbreplay.cli import main

if __name__ == "__main__":
    sys.argv = [sys.argv[0], "report", *sys.argv[1:]]
    main()

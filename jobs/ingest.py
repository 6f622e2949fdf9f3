"""spark-submit entry point: `lbreplay ingest` with the same flags (see `lbreplay ingest --help`)."""

import sys

from lbreplay.cli import main

if __name__ == "__main__":
    sys.argv = [sys.argv[0], "ingest", *sys.argv[1:]]
    main()

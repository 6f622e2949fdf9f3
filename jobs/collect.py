"""Entry point: `lbreplay collect` with the same flags (see `lbreplay collect --help`)."""

import sys

from lbreplay.cli import main

if __name__ == "__main__":
    sys.argv = [sys.argv[0], "collect", *sys.argv[1:]]
    main()

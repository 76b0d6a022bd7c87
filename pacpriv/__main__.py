"""``python -m pacpriv`` runs the command line."""

import sys

from pacpriv.cli import main

if __name__ == "__main__":
    sys.exit(main())

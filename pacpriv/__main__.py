"""``python -m pacpriv`` runs the command line."""

import sys

from pacpriv.cli import main

sys.exit(main())

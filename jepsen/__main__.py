"""`python -m jepsen ...`: see jepsen/cli.py."""

import sys

from jepsen.cli import main

sys.exit(main())

"""`python -m sreforge` runs the CLI."""

import sys

from sreforge.cli import main

sys.exit(main())

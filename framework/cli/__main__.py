"""`python -m framework.cli` is `logwheel`."""

import sys

from framework.cli.main import main

sys.exit(main())

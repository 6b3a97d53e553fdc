"""`python -m jobs.cli`: the `rebalance` command."""

import sys

from jobs.cli import main

sys.exit(main())

"""The `rebalance` command line (`jobs.cli.commands`): `main` is the console script, `python -m jobs.cli` runs it."""

from jobs.cli.commands import main

__all__ = ["main"]

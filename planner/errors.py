"""One error hierarchy for the whole project: the CLI catches `RebalanceError` once and exits 2 with its message.

`InputError` names the input and what is wrong with it (file, JSON path, field); `SourceError` names the outside
cause (broker unreachable, authentication refused, disk full). Both carry a one-line message fit for a user.
"""

from __future__ import annotations


class RebalanceError(Exception):
    """Base of every error this project raises on purpose; its message is shown to the user as it is."""


class InputError(RebalanceError, ValueError):
    """Bad input: the message names the input (file, JSON path, parameter) and what is wrong with it."""


class LimitError(InputError):
    """Input over a configured ceiling (partitions, members), refused before anything is allocated."""


class SourceError(RebalanceError):
    """Something outside the project failed: the message names the cause (broker, disk, Java, Spark)."""


__all__ = ["InputError", "LimitError", "RebalanceError", "SourceError"]

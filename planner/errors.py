"""One error hierarchy for the whole project: the CLI catches `RebalanceError` once and exits 2 with its message.

`InputError` names the input and what is wrong with it (file, JSON path, field); `SourceError` names the outside
cause (broker unreachable, authentication refused, disk full); `PlanError` is an exported plan file that cannot be
served (with the reason code appliers log). Each carries a one-line message fit for a user. Standard library only:
consumer applications import it through `jobs.apply`.
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


class PlanError(InputError):
    """A plan document that cannot be served; the message names the file or JSON path and the problem.

    `code` is the reason an applier logs and the shared fixtures (schemas/fixtures/apply) expect: `plan_unreadable`
    (no file, or not UTF-8), `wrong_format` (not a rebalance-plan/1 document) or `malformed_plan` (anything else).
    """

    def __init__(self, message: str, code: str = "malformed_plan") -> None:
        super().__init__(message)
        self.code = code


__all__ = ["InputError", "LimitError", "PlanError", "RebalanceError", "SourceError"]

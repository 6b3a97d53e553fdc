"""The approval task: Airflow's human-in-the-loop ApprovalOperator, keeping the reviewer's answer for the record step.

A Reject fails the task (`fail_on_reject`): a rejected plan fails its run loudly, and the record step, which runs
whatever its upstream became, still finds the answer in XCom (a failed task pushes no return value). A request
nobody answers within the run's `approval_timeout_hours` is rejected: Airflow's scheduler applies the default
(Reject) when the deadline passes, and the answer records that nobody reviewed the plans.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator

ANSWER = "answer"
"""XCom key of the answer: decision (approve | reject), reviewer, reviewed_at (ISO 8601), comment."""


class PlanApproval(ApprovalOperator):
    """ApprovalOperator that pushes the answer, then approves or fails (on Reject) as its parent does."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(fail_on_reject=True, defaults=[self.REJECT], **kwargs)

    def execute(self, context: Any) -> Any:
        """Ask, with the deadline the run's `approval_timeout_hours` sets."""
        self.response_timeout = timedelta(hours=float(context["params"]["approval_timeout_hours"]))
        return super().execute(context)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        if "error" not in event:
            user = event.get("responded_by_user") or {}
            comment = (event.get("params_input") or {}).get("comment") or ""
            if event.get("timedout"):
                hours = context["params"]["approval_timeout_hours"]
                comment = f"no answer within {hours:g} h: rejected by the approval timeout"
            context["ti"].xcom_push(
                key=ANSWER,
                value={
                    "decision": "approve" if event["chosen_options"] == [self.APPROVE] else "reject",
                    "reviewer": "nobody (timed out)"
                    if event.get("timedout")
                    else user.get("name") or user.get("id") or "unknown",
                    "reviewed_at": event["responded_at"].isoformat(),
                    "comment": comment,
                },
            )
        return super().execute_complete(context, event)

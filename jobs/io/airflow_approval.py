"""The approval task: Airflow's human-in-the-loop ApprovalOperator, keeping the reviewer's answer for the record step.

A Reject fails the task (`fail_on_reject`): a rejected plan fails its run loudly, and the record step, which runs
whatever its upstream became, still finds the answer in XCom (a failed task pushes no return value).
"""

from __future__ import annotations

from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator

ANSWER = "answer"
"""XCom key of the answer: decision (approve | reject), reviewer, reviewed_at (ISO 8601), comment."""


class PlanApproval(ApprovalOperator):
    """ApprovalOperator that pushes the answer, then approves or fails (on Reject) as its parent does."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(fail_on_reject=True, **kwargs)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        if "error" not in event:
            user = event.get("responded_by_user") or {}
            context["ti"].xcom_push(
                key=ANSWER,
                value={
                    "decision": "approve" if event["chosen_options"] == [self.APPROVE] else "reject",
                    "reviewer": user.get("name") or user.get("id") or "unknown",
                    "reviewed_at": event["responded_at"].isoformat(),
                    "comment": (event.get("params_input") or {}).get("comment") or "",
                },
            )
        return super().execute_complete(context, event)

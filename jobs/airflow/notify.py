"""Failure notifications: a failed DAG run posted as JSON to a webhook named by an Airflow connection.

`REBALANCE_WEBHOOK_CONN_ID` names the connection (unset: no notification). Its host is the webhook URL; a connection
given as a URI (`http://host:port/path`) is put back together from its parts. Its password, when set, goes as a
bearer token. Neither the URL nor the token is ever logged or put in an error: webhook URLs often carry their
secret in the path. The body says which run failed, which task, and the run's alarms (rejected generations,
drifted plans), with a `text` line for chat webhooks.
"""

from __future__ import annotations

import os
from typing import Any

from airflow.sdk.bases.notifier import BaseNotifier

from planner.errors import SourceError

WEBHOOK_CONN_ID = "REBALANCE_WEBHOOK_CONN_ID"


class WebhookNotifier(BaseNotifier):
    """Posts a failed run's summary to the webhook of `conn_id` (default: the connection REBALANCE_WEBHOOK_CONN_ID
    names when the callback runs)."""

    def __init__(self, conn_id: str | None = None, *, timeout: float = 10.0) -> None:
        super().__init__()
        self.conn_id = conn_id
        self.timeout = timeout

    def render_template_fields(self, context: Any, jinja_env: Any = None) -> None:
        """Nothing to render (no template fields). Overridden because the base builds a Jinja environment from
        context["dag"], which under `dag.test()` is the scheduler's SerializedDAG and has none."""

    def notify(self, context: Any) -> None:
        conn_id = self.conn_id or os.environ.get(WEBHOOK_CONN_ID)
        if conn_id:
            post(conn_id, failure_payload(context), self.timeout)


def failure_payload(context: Any) -> dict[str, Any]:
    """What a failure callback's context tells about the run, plus the run's alarms read from the lake."""
    dag_run, ti = context.get("dag_run"), context.get("ti")
    dag_id = getattr(context.get("dag"), "dag_id", None) or getattr(dag_run, "dag_id", None)
    run_id = context.get("run_id") or getattr(dag_run, "run_id", None)
    try:
        alarms, unknown = run_alarms(context.get("params") or {}, run_id) if run_id else [], None
    except Exception as e:  # the lake may be why the run failed: the notification goes out all the same
        alarms, unknown = [], f"alarms unknown: the lake could not be read ({type(e).__name__})"
    task_id = getattr(ti, "task_id", None)
    text = f"{dag_id} run {run_id} failed" + (f" at task {task_id}" if task_id else "")
    if alarms or unknown:
        text += f": {'; '.join(alarms) or unknown}"
    return {
        "dag_id": dag_id,
        "run_id": run_id,
        "reason": context.get("reason"),
        "failed_task": task_id,
        "alarms": alarms,
        "text": text,
    } | ({"alarms_unknown": unknown} if unknown else {})


def run_alarms(params: dict[str, Any], run_id: str) -> list[str]:
    """The run's alarms from its lake (the run's `lake` param, else REBALANCE_LAKE)."""
    from jobs.io.lake import Lake
    from jobs.pipeline import config_from_params
    from jobs.steps.signals import alarms

    return alarms(Lake(config_from_params(params).lake), run_id)


def post(conn_id: str, payload: dict[str, Any], timeout: float) -> None:
    """POST `payload` as JSON to the connection's webhook; a SourceError naming the connection (never the URL)."""
    import httpx
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        raise SourceError(f"Airflow connection {conn_id!r} ({WEBHOOK_CONN_ID}) is not defined") from None
    host = conn.host or ""
    url = host if "://" in host else _url(conn)
    headers = {"Authorization": f"Bearer {conn.password}"} if conn.password else {}
    try:
        response = httpx.post(url, json=payload, headers=headers, timeout=timeout)
    except httpx.HTTPError as e:
        raise SourceError(f"webhook of Airflow connection {conn_id!r} unreachable ({type(e).__name__})") from None
    if response.is_error:
        raise SourceError(f"webhook of Airflow connection {conn_id!r} answered HTTP {response.status_code}")


def _url(conn: Any) -> str:
    """A URL from a connection's parts (a connection given as `http://host:port/path` is stored split)."""
    if not conn.host:
        raise SourceError(f"Airflow connection {conn.conn_id!r} ({WEBHOOK_CONN_ID}) has no host: set it to the URL")
    scheme = "https" if conn.conn_type == "https" else "http"
    port = f":{conn.port}" if conn.port else ""
    return f"{scheme}://{conn.host}{port}/{(conn.schema or '').lstrip('/')}"

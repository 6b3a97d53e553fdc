"""Approval: gated generations, a person's review (Airflow's ApprovalOperator or `rebalance review`), superseded
approvals and abandoned candidates, on real Spark, delta-rs and Great Expectations."""

from __future__ import annotations

import json
import secrets
import threading
import time
from datetime import UTC, datetime
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from jobs import pipeline
from jobs.cli import main
from jobs.config import Config
from jobs.context import RunContext
from jobs.io.lake import Lake, rows_table
from jobs.tables.lifecycle import settle
from schemas.status import GenerationStatus as S

DEMO = Path(__file__).resolve().parents[2] / "jobs" / "demo" / "data"
DEMO_GROUPS = ["audit-archiver", "clickstream-etl", "inventory", "payments", "shipping"]
T0 = datetime(2026, 11, 21, 2, 0, tzinfo=UTC)


def statuses(lake: Lake) -> dict[tuple[str, int], str]:
    return {(g["group_id"], g["generation_id"]): g["status"] for g in lake.read_arrow("generations").to_pylist()}


def dag_bag():
    from airflow.dag_processing.dagbag import DagBag

    from jobs.airflow.environment import DAGS_FOLDER

    return DagBag(dag_folder=str(DAGS_FOLDER))


def generation(lake: Lake, group: str, n: int) -> dict:
    (row,) = lake.read_arrow("generations", [("group_id", "=", group), ("generation_id", "=", n)]).to_pylist()
    return row


@pytest.mark.spark
def test_with_approval_on_a_person_decides_and_a_newer_approval_supersedes(spark, lake, monkeypatch, capsys):
    config = Config(lake=str(lake.root), snapshots=str(DEMO), strategies=("range",))
    monkeypatch.setenv("REBALANCE_APPROVAL", "true")
    result = pipeline.run(config, "gated-run", spark=spark)
    assert [(r["group_id"], r["status"]) for r in result.report] == [(g, S.GATED) for g in DEMO_GROUPS]
    assert {r["status_reason"] for r in result.report} == {"gate passed; awaiting review"}
    assert "5 generation(s) passed the gate and await review" in capsys.readouterr().out  # the review step's summary

    root = str(lake.root)
    argv = ["review", "--lake", root, "--group", "payments", "--generation", "1"]
    assert main([*argv, "--approve", "--reviewer", "alice", "--comment", "moves 2 partitions, fine"]) == 0
    assert capsys.readouterr().out.strip() == "generation 1 of group payments: approved by alice"
    assert main(["review", "--lake", root, "--group", "inventory", "--generation", "1", "--reject"]) == 0
    capsys.readouterr()
    approved, rejected = generation(lake, "payments", 1), generation(lake, "inventory", 1)
    assert (approved["status"], approved["reviewed_by"], approved["review_comment"]) == (
        S.APPROVED,
        "alice",
        "moves 2 partitions, fine",
    )
    assert approved["reviewed_at"] is not None and approved["status_at"] == approved["reviewed_at"]
    assert rejected["status"] == S.REJECTED and rejected["reviewed_by"]  # the login name by default

    # Only a gated generation awaits review; the error names the generation and exits 2.
    for args, named in [
        (["--group", "payments", "--generation", "1", "--reject"], "generation 1 of group 'payments' is approved"),
        (["--group", "payments", "--generation", "9", "--approve"], "group 'payments' has no generation 9"),
        (["--group", "nobody", "--generation", "1", "--approve"], "group 'nobody' has no generation 1"),
    ]:
        assert main(["review", "--lake", root, *args]) == 2
        assert named in capsys.readouterr().err
    assert generation(lake, "payments", 1)["status"] == S.APPROVED

    # Re-publishing the run keeps the reviewers' decisions; the rest stay gated.
    pipeline.publish(RunContext.create(config, "gated-run", spark=spark), {})
    assert statuses(lake)[("payments", 1)] == S.APPROVED and statuses(lake)[("inventory", 1)] == S.REJECTED
    capsys.readouterr()

    # Approval off: the next run's generations are approved by the gate and supersede generation 1 of payments.
    monkeypatch.setenv("REBALANCE_APPROVAL", "false")
    pipeline.run(config, "next-run", spark=spark)
    payments_1 = generation(lake, "payments", 1)
    assert (payments_1["status"], payments_1["status_reason"]) == (S.SUPERSEDED, "generation 2 was approved")
    assert payments_1["reviewed_by"] == "alice"  # the review stays on record
    assert statuses(lake)[("payments", 2)] == S.APPROVED
    assert statuses(lake)[("inventory", 1)] == S.REJECTED  # never approved, so never superseded
    assert statuses(lake)[("shipping", 1)] == S.GATED  # awaiting review still; a newer approval does not decide it


def _row(group: str, n: int, status: str, run_id: str) -> dict:
    return {"group_id": group, "generation_id": n, "run_id": run_id, "status": status, "created_at": T0}


def test_settle_abandons_candidates_left_behind_and_supersedes_older_approvals(lake):
    lake.merge(
        "generations",
        rows_table(
            "generations",
            [
                _row("g", 1, S.APPROVED, "r1"),
                _row("g", 2, S.CANDIDATE, "crashed"),
                _row("g", 3, S.REJECTED, "r3"),
                _row("g", 4, S.APPROVED, "r4"),
                _row("g", 5, S.CANDIDATE, "still-running"),
                _row("h", 1, S.CANDIDATE, "only"),
            ],
        ),
    )
    changed = settle(lake, ["g", "h"], T0)
    assert sorted((r["group_id"], r["generation_id"], r["status"], r["status_reason"]) for r in changed) == [
        ("g", 1, S.SUPERSEDED, "generation 4 was approved"),
        (
            "g",
            2,
            S.ABANDONED,
            "run crashed ended without publishing it; generation 4 (run r4) was published after it",
        ),
    ]
    assert statuses(lake) == {
        ("g", 1): S.SUPERSEDED,
        ("g", 2): S.ABANDONED,
        ("g", 3): S.REJECTED,
        ("g", 4): S.APPROVED,
        ("g", 5): S.CANDIDATE,  # newer than every published generation: its run may still be going
        ("h", 1): S.CANDIDATE,
    }
    assert settle(lake, ["g", "h"], T0) == []  # settled: nothing more to change


def test_an_old_lake_gains_the_new_generation_columns_and_keeps_its_rows(tmp_path):
    import pyarrow as pa
    from deltalake import write_deltalake

    from schemas import TABLES

    spec = TABLES["generations"]
    before = pa.schema([f for f in spec.schema if f.name not in {"status_reason", "reviewed_by", "report_path"}])
    row = {"group_id": "g", "generation_id": 1, "status": "approved", "gate_summary": "4/4 expectations passed"}
    write_deltalake(tmp_path / "lake" / "generations", pa.Table.from_pylist([row], schema=before))
    lake = Lake(tmp_path / "lake")
    lake.create_all()
    lake.create_all()  # a second start finds nothing to add
    (stored,) = lake.read_arrow("generations").to_pylist()
    assert {k: stored[k] for k in row} == row
    assert stored["reviewed_by"] is None and stored["report_path"] is None


# --- Airflow: the approval task under `dag.test()`, answered through the REST API v2 as a reviewer's browser does.


@pytest.fixture(scope="module")
def airflow_db() -> None:
    from jobs.airflow.environment import configure, migrate_once

    migrate_once(configure())


@pytest.fixture
def reviewer_api(tmp_path, monkeypatch, airflow_db):
    """Airflow's public REST API (the api-server's app, in this process, on this metadatabase) logged in as alice.

    SimpleAuthManager with one admin user whose password file the test writes, as `airflow api-server` reads it.
    """
    from airflow.api_fastapi.app import create_app
    from fastapi.testclient import TestClient

    passwords = tmp_path / "passwords.json"
    passwords.write_text(json.dumps({"alice": "correct horse"}))
    monkeypatch.setenv("AIRFLOW__CORE__AUTH_MANAGER", SIMPLE_AUTH_MANAGER)
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS", "False")
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", "alice:admin")
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", str(passwords))
    monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", secrets.token_urlsafe(64))
    with TestClient(create_app(apps="core")) as client:
        login = client.post("/auth/token", json={"username": "alice", "password": "correct horse"})
        assert login.status_code == 201, login.text
        client.headers["Authorization"] = f"Bearer {login.json()['access_token']}"
        yield client


SIMPLE_AUTH_MANAGER = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
REVIEW_TIMEOUT = 900.0


class Reviewer(threading.Thread):
    """Waits for the run's approval request in the REST API's list of pending ones, keeps it, and answers it."""

    def __init__(self, api, dag_id: str, option: str, comment: str) -> None:
        super().__init__(daemon=True)
        self.api, self.dag_id, self.option, self.comment = api, dag_id, option, comment
        self.request: dict | None = None
        self.answer: dict | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            deadline = time.monotonic() + REVIEW_TIMEOUT
            while self.request is None and time.monotonic() < deadline:
                pending = self.api.get(f"/api/v2/dags/{self.dag_id}/dagRuns/~/hitlDetails")
                pending.raise_for_status()
                waiting = [d for d in pending.json()["hitl_details"] if not d["response_received"]]
                self.request = waiting[0] if waiting else None
                time.sleep(0.5)
            assert self.request is not None, "no approval request appeared"
            ti = self.request["task_instance"]
            path = (
                f"/api/v2/dags/{ti['dag_id']}/dagRuns/{ti['dag_run_id']}/taskInstances/{ti['task_id']}/-1/hitlDetails"
            )
            response = self.api.patch(
                path, json={"chosen_options": [self.option], "params_input": {"comment": self.comment}}
            )
            assert response.status_code == 200, response.text
            self.answer = response.json()
        except BaseException as e:  # reported by the test after dag.test returns
            self.error = e


def test_turned_on_the_approval_task_asks_a_person_and_records_the_approval(spark, lake, reviewer_api, monkeypatch):
    from airflow.utils.state import DagRunState

    from jobs.airflow.tasks import APPROVAL_TASK

    monkeypatch.delenv("REBALANCE_APPROVAL", raising=False)
    dag = dag_bag().dags["rebalance_nightly"]
    assert dag.params["approval"] is False  # default: the gate decides
    reviewer = Reviewer(reviewer_api, dag.dag_id, "Approve", "balanced enough")
    reviewer.start()
    run = dag.test(run_conf={"lake": str(lake.root), "snapshots": str(DEMO), "strategies": "range", "approval": True})
    reviewer.join(timeout=5)
    assert reviewer.error is None, reviewer.error
    assert run.state == DagRunState.SUCCESS

    request = reviewer.request
    assert request["task_instance"]["task_id"] == APPROVAL_TASK
    assert request["options"] == ["Approve", "Reject"]
    generations = sorted(lake.read_arrow("generations").to_pylist(), key=lambda g: g["group_id"])
    assert [(g["group_id"], g["status"]) for g in generations] == [(g, S.APPROVED) for g in DEMO_GROUPS]
    for g in generations:
        assert (g["reviewed_by"], g["review_comment"]) == ("alice", "balanced enough")
        assert g["reviewed_at"] == datetime.fromisoformat(reviewer.answer["responded_at"])
        assert Path(g["report_path"]).is_file()
        # The reviewer saw each group's plan and its report page.
        assert f"| {g['group_id']} | {g['generation_id']} | {g['chosen_strategy']} |" in request["body"]
        assert f"`{g['report_path']}`" in request["body"]
    metrics = (lake.local / "metrics" / "rebalance.prom").read_text()
    assert 'rebalance_generation_status{group="payments",status="approved"} 1.0' in metrics


class Webhook:
    """A tiny HTTP server on 127.0.0.1 that keeps every POST (path, headers, JSON body) and answers 204."""

    def __init__(self) -> None:
        received = self.received = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.append({"path": self.path, "headers": dict(self.headers), "json": json.loads(body)})
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def webhook(monkeypatch):
    """The webhook server, named by the connection REBALANCE_WEBHOOK_CONN_ID points at (secret path and token)."""
    hook = Webhook()
    conn = {"conn_type": "http", "host": f"http://127.0.0.1:{hook.port}/hooks/{SECRET_PATH}", "password": TOKEN}
    monkeypatch.setenv("AIRFLOW_CONN_REBALANCE_WEBHOOK", json.dumps(conn))
    monkeypatch.setenv("REBALANCE_WEBHOOK_CONN_ID", "rebalance_webhook")
    yield hook
    hook.stop()


SECRET_PATH, TOKEN = "T0-s3cret-path", "tok3n-never-logged"


def test_a_rejected_plan_is_recorded_fails_the_run_loudly_and_posts_to_the_webhook(
    spark, lake, reviewer_api, webhook, monkeypatch, capfd, caplog
):
    from airflow.utils.state import DagRunState

    monkeypatch.delenv("REBALANCE_APPROVAL", raising=False)
    pipeline.run(Config(lake=str(lake.root), snapshots=str(DEMO), strategies=("range",)), "nightly", spark=spark)
    dag = dag_bag().dags["rebalance_what_if"]
    reviewer = Reviewer(reviewer_api, dag.dag_id, "Reject", "moves too much before the sale")
    reviewer.start()
    run = dag.test(
        run_conf={
            "lake": str(lake.root),
            "group": "inventory",
            "add_members": 1,
            "strategies": "range",
            "approval": True,
        }
    )
    reviewer.join(timeout=5)
    assert reviewer.error is None, reviewer.error
    assert run.state == DagRunState.FAILED
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert (states["approval"], states["record_review"], states["signals"]) == ("failed", "success", "failed")

    rejected = generation(lake, "inventory", 2)
    assert (rejected["status"], rejected["reviewed_by"], rejected["review_comment"]) == (
        S.REJECTED,
        "alice",
        "moves too much before the sale",
    )
    assert statuses(lake)[("inventory", 1)] == S.APPROVED  # the plan in force stays

    (post,) = webhook.received
    assert post["path"] == f"/hooks/{SECRET_PATH}"
    assert post["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert post["json"]["dag_id"] == "rebalance_what_if" and post["json"]["run_id"] == run.run_id
    assert post["json"]["alarms"] == ["group inventory: generation 2 rejected (rejected by alice)"]
    assert "group inventory: generation 2 rejected" in post["json"]["text"]
    logged = capfd.readouterr().out + capfd.readouterr().err + caplog.text
    assert "group inventory: generation 2 rejected" in logged  # the signals task's failure names the group
    assert SECRET_PATH not in logged and TOKEN not in logged


def test_the_notifier_names_the_connection_and_never_the_url_when_the_webhook_fails(webhook, monkeypatch):
    from jobs.airflow.notify import post
    from planner.errors import SourceError

    webhook.stop()  # nothing listens on its port any more
    with pytest.raises(SourceError) as failed:
        post("rebalance_webhook", {"text": "x"}, timeout=5.0)
    assert str(failed.value) == "webhook of Airflow connection 'rebalance_webhook' unreachable (ConnectError)"
    monkeypatch.delenv("AIRFLOW_CONN_REBALANCE_WEBHOOK")
    with pytest.raises(SourceError, match="connection 'rebalance_webhook' .REBALANCE_WEBHOOK_CONN_ID. is not defined"):
        post("rebalance_webhook", {"text": "x"}, timeout=5.0)


@pytest.mark.slow
@pytest.mark.spark
def test_under_the_real_scheduler_the_approval_task_waits_for_the_reviewer_and_resumes(
    spark, lake, tmp_path_factory, monkeypatch, capsys
):
    """Airflow 3.3 parks the approval task in `awaiting_input` (no triggerer); the reviewer's PATCH through the REST
    API v2 resumes it on the scheduler (LocalExecutor), and the record step writes the answer. A second run nobody
    answers is rejected by the scheduler's timeout sweep once its `approval_timeout_hours` pass, failing loudly."""
    from airflow_server import airflow_server

    monkeypatch.delenv("REBALANCE_APPROVAL", raising=False)
    pipeline.run(Config(lake=str(lake.root), snapshots=str(DEMO), strategies=("range",)), "nightly", spark=spark)
    env = {
        "REBALANCE_LAKE": str(lake.root),
        "REBALANCE_SPARK_MASTER": "local[1]",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",  # the nightly DAG stays paused: only the what-if runs
        "AIRFLOW__SCHEDULER__TRIGGER_TIMEOUT_CHECK_INTERVAL": "2",  # the sweep that applies approval timeouts
    }
    with airflow_server(tmp_path_factory.mktemp("airflow_home"), env) as server:
        api, dag_id = server.api, "rebalance_what_if"
        server.wait_for(
            "the what-if DAG parsed", lambda: api.get(f"/api/v2/dags/{dag_id}").status_code == 200 or None, 120
        )
        api.patch(f"/api/v2/dags/{dag_id}", json={"is_paused": False}).raise_for_status()
        conf = {"group": "payments", "add_members": 1, "strategies": "range", "approval": True}
        response = api.post(f"/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": conf})
        assert response.status_code == 200, response.text
        run_id, triggered = response.json()["dag_run_id"], time.monotonic()
        task = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/approval"

        def awaiting() -> bool | None:
            state = api.get(task).raise_for_status().json()["state"]
            assert state not in ("failed", "upstream_failed", "skipped"), state
            return state == "awaiting_input" or None

        server.wait_for("the approval task awaiting input", awaiting, 600.0, every=2.0)
        asked = time.monotonic()
        parked = partial(server.worker_exit_seen, dag_id, run_id, "approval")
        server.wait_for("the scheduler seeing the parked approval worker exit", parked, 120.0)
        detail = api.get(f"{task}/-1/hitlDetails").raise_for_status().json()
        assert "| payments | 2 | range |" in detail["body"]
        answer = {"chosen_options": ["Approve"], "params_input": {"comment": "one more member, fine"}}
        response = api.patch(f"{task}/-1/hitlDetails", json=answer)
        assert response.status_code == 200, response.text
        reviewer = response.json()["responded_by"]["name"]

        def finished() -> dict | None:
            run = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}").raise_for_status().json()
            return run if run["state"] in ("success", "failed") else None

        run = server.wait_for("the end of the what-if run", finished, 600.0, every=2.0)
        with capsys.disabled():
            print(
                f"\n{dag_id} under the scheduler: trigger -> awaiting input {asked - triggered:.1f} s, "
                f"answer -> {run['state']} {time.monotonic() - asked:.1f} s (2 s polls)"
            )
        assert run["state"] == "success", server.failures(run)

        # 18 s, and nobody answers: the parked worker's exit is seen long before the sweep resumes the task
        conf |= {"approval_timeout_hours": 0.005}
        response = api.post(f"/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": conf})
        assert response.status_code == 200, response.text
        run_id = response.json()["dag_run_id"]
        unanswered = server.wait_for("the end of the unanswered run", finished, 600.0, every=2.0)
        tasks = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances").raise_for_status().json()
        states = {t["task_id"]: t["state"] for t in tasks["task_instances"]}
        outcome = (unanswered["state"], states["approval"], states["record_review"])
        assert outcome == ("failed", "failed", "success"), server.failures(unanswered)
    approved = generation(lake, "payments", 2)
    assert (approved["status"], approved["review_comment"]) == (S.APPROVED, "one more member, fine")
    assert approved["reviewed_by"] == reviewer
    assert statuses(lake)[("payments", 1)] == S.SUPERSEDED
    timed_out = generation(lake, "payments", 3)
    assert (timed_out["status"], timed_out["reviewed_by"]) == (S.REJECTED, "nobody (timed out)")
    assert timed_out["review_comment"] == "no answer within 0.005 h: rejected by the approval timeout"

"""The `rebalance` command as a user runs it: exit codes and what it prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobs import pipeline
from jobs.cli import main

DEMO = Path(__file__).resolve().parents[2] / "jobs" / "demo" / "data"


@pytest.mark.spark
def test_run_then_sql_over_the_history(spark, tmp_path, capsys):
    lake = str(tmp_path / "lake")
    assert (
        main(["run", "--snapshots", str(DEMO), "--lake", lake, "--strategies", "range,sticky", "--run-id", "r1"]) == 0
    )
    assert spark.range(3).count() == 3  # the run found this session running: it stops only a JVM it started
    out = capsys.readouterr().out
    assert "run r1: 5 groups ingested, 1 inputs quarantined" in out
    (timings,) = [line.removeprefix("steps: ") for line in out.splitlines() if line.startswith("steps: ")]
    assert [t.rsplit(" ", 2)[0] for t in timings.split(", ")] == list(pipeline.NIGHTLY)  # each step's time, in order
    assert all(t.endswith(" s") for t in timings.split(", "))
    assert "billing-truncated.json: invalid JSON" in out
    assert out.count("approved") == 5
    assert (
        main(["sql", "SELECT count(*) AS generations FROM generations WHERE status = 'approved'", "--lake", lake]) == 0
    )
    assert capsys.readouterr().out.split() == ["generations", "5"]
    assert main(["report", "--lake", lake, "--output", str(tmp_path / "reports"), "--group", "payments"]) == 0
    assert "pages written" in capsys.readouterr().out
    assert (tmp_path / "reports" / "payments" / "generation-1.html").is_file()
    assert (tmp_path / "reports" / "plotly.min.js").is_file()


@pytest.mark.spark
def test_what_if_prints_the_answer_and_json_for_scripts(spark, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("REBALANCE_REPORTS", str(tmp_path / "reports"))
    lake = str(tmp_path / "lake")
    assert main(["run", "--snapshots", str(DEMO), "--lake", lake, "--strategies", "range,sticky", "--run-id", "r"]) == 0
    capsys.readouterr()
    argv = ["what-if", "--group", "payments", "--add-members", "2", "--strategies", "range,sticky", "--lake", lake]

    assert main([*argv, "--json"]) == 0
    found = json.loads(capsys.readouterr().out)  # stdout holds the answer alone: the steps' lines go to stderr
    assert (found["group_id"], found["generation_id"], found["status"]) == ("payments", 2, "approved")
    assert [s["strategy"] for s in found["strategies"]] == ["range", "sticky"]
    (chosen,) = [s for s in found["strategies"] if s["chosen"]]
    assert found["chosen"] == chosen["strategy"]
    assert len(found["moves"]) == chosen["partitions_moved"] > 0  # two members join: partitions move to them
    assert all(m["to"] != m["from"] for m in found["moves"])
    today = found["today"]
    # Today's balance is over the same partitions, weights and members as each plan's: the means agree, and two
    # members owning nothing today make today's count spread at least the busiest member's count.
    assert all(today["mean_load"] == pytest.approx(s["mean_load"]) for s in found["strategies"])
    assert today["max_mean_load"] >= chosen["max_mean_load"] and today["count_spread"] > chosen["count_spread"]
    assert Path(found["report"]).is_file()

    assert main(argv) == 0
    text = capsys.readouterr().out
    assert text.startswith("what-if payments: generation 3, approved")
    assert f"{found['chosen']} (chosen)" in text and "today" in text and f"report: {tmp_path / 'reports'}" in text
    assert f"{found['chosen']} moves {len(found['moves'])} partition(s):" in text


def test_help_exits_0_and_a_usage_error_2_as_argparse_says():
    def rebalance(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "jobs.cli", *argv], capture_output=True, text=True, timeout=60)

    helped = rebalance("assign", "--help")
    assert helped.returncode == 0 and helped.stdout.startswith("usage: rebalance assign")
    for argv, line in [(("run", "--bogus"), "unrecognized arguments: --bogus"), ((), "required: command")]:
        refused = rebalance(*argv)
        assert refused.returncode == 2 and refused.stdout == ""
        assert refused.stderr.splitlines()[-1].startswith("rebalance") and line in refused.stderr


def test_the_jvm_output_goes_to_its_log_and_a_refused_query_is_one_line(tmp_path):
    from jobs.io.lake import Lake

    Lake(tmp_path / "lake").create_all()
    log = tmp_path / "spark.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REBALANCE_", "SPARK_", "PYSPARK_"))}
    env |= {"REBALANCE_SPARK_LOG": str(log), "REBALANCE_SPARK_MASTER": "local[1]"}

    # Statements run in turn: the answers of those before a refused one are printed, then its one line.
    argv = [sys.executable, "-m", "jobs.cli", "sql", "SELECT 1 AS one", "SELECT 2 AS two", "SELECT * FROM nosuchtable"]
    refused = subprocess.run(
        [*argv, "--lake", str(tmp_path / "lake")], env=env, capture_output=True, text=True, timeout=600
    )
    assert refused.returncode == 2
    assert [answer.split() for answer in refused.stdout.split("\n\n")] == [["one", "1"], ["two", "2"]]
    assert refused.stderr.splitlines() == [
        line for line in refused.stderr.splitlines() if line.startswith("rebalance sql: error: ")
    ]
    assert len(refused.stderr.splitlines()) == 1 and "TABLE_OR_VIEW_NOT_FOUND" in refused.stderr
    written = log.read_text()  # the JVM's start-up lines and the query's stack trace
    assert written.count('Setting default log level to "WARN"') == 1 and "CheckAnalysis" in written


def test_an_unusable_class_archive_costs_a_start_nothing_but_its_speed(tmp_path, monkeypatch):
    # An archive made by another JVM build, or cut short: the JVM ignores it, silently, and the command runs.
    from jobs.io import spark_cds
    from jobs.io.lake import Lake
    from jobs.io.spark import JVM_OPTIONS, delta_jars

    Lake(tmp_path / "lake").create_all()
    monkeypatch.setattr(spark_cds, "CDS_DIR", tmp_path / "cds")
    archive = spark_cds.archive_path(JVM_OPTIONS, delta_jars())
    archive.parent.mkdir()
    archive.write_bytes(b"\x00" * 4096)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REBALANCE_", "SPARK_", "PYSPARK_"))}
    env |= {"REBALANCE_SPARK_CDS_DIR": str(archive.parent), "REBALANCE_SPARK_LOG": str(tmp_path / "spark.log")}
    argv = [sys.executable, "-m", "jobs.cli", "sql", "SELECT 1 AS one", "--lake", str(tmp_path / "lake")]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert (done.returncode, done.stdout.split(), done.stderr) == (0, ["one", "1"], "")
    assert f"-XX:SharedArchiveFile={archive}" in spark_cds.driver_options(JVM_OPTIONS, delta_jars())


@pytest.mark.spark
def test_a_run_with_no_groups_exits_0_and_says_so(spark, tmp_path, capsys):
    # A new deployment's first night: nothing to plan (an empty broker, or a file holding no group).
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    assert main(["run", "--snapshots", str(empty), "--lake", str(tmp_path / "lake"), "--run-id", "first"]) == 0
    out = capsys.readouterr().out
    assert "run first: 0 groups ingested" in out and f"no groups in {empty}" in out


def test_run_without_input_is_a_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("REBALANCE_KAFKA_BOOTSTRAP_SERVERS", raising=False)
    assert main(["run", "--snapshots", str(tmp_path / "none-*.json"), "--lake", str(tmp_path / "lake")]) == 2
    assert "rebalance run: error: no snapshot files match" in capsys.readouterr().err


def test_hash_prints_key_hash_and_partition(capsys):
    assert main(["hash", "--partitions", "12", "order-1"]) == 0
    assert capsys.readouterr().out.split() == ["order-1", "1221710326", "10"]


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["what-if", "--group", "payments", "--partitions", "orders=x"], "--partitions: expected TOPIC=N"),
        (["what-if", "--group", "nope"], "no observed snapshot of group 'nope'"),
        (["sql", "SELEC group_id FROM generations"], "not valid Spark SQL"),
        (["assign", "--strategy", "no-such-assignor", "{path}"], "unknown strategy 'no-such-assignor'"),
        (["assign", "does-not-exist.json"], "does-not-exist.json: No such file or directory"),
        (["hash", "--partitions", "0", "k"], "num_partitions must be positive"),
        (["skew", "--what-if", "a-b"], "--what-if: expected N, A-B or A-B:STEP"),
    ],
)
def test_user_errors_exit_2_with_the_input_named_and_no_traceback(argv, named, spark, tmp_path, capsys, monkeypatch):
    group = tmp_path / "group.json"
    group.write_text('{"topics": {"t": 2}, "members": {"m": {"topics": ["t"]}}}')
    monkeypatch.setenv("REBALANCE_LAKE", str(tmp_path / "lake"))
    assert main([a.replace("{path}", str(group)) for a in argv]) == 2
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err
    assert err.startswith(f"rebalance {argv[0]}: error: ")


@pytest.mark.spark
def test_ids_from_kafka_print_with_escapes_made_visible_and_long_ones_shortened(spark, tmp_path, capsys):
    # A group id carrying a terminal escape and a right-to-left override, and one of 100,000 characters.
    doc = json.loads((DEMO / "payments.json").read_text())
    hostile, huge = "pay\x1b]0;pwned\x07ments\u202etxt", "g" * 100_000
    files = tmp_path / "snapshots"
    files.mkdir()
    for i, group in enumerate((hostile, huge)):
        (files / f"{i}.json").write_text(json.dumps(doc | {"group_id": group}))
    argv = ["run", "--snapshots", str(files), "--lake", str(tmp_path / "lake"), "--strategies", "range"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out
    assert "pay\\x1b]0;pwned\\x07ments\\u202etxt" in out
    assert huge not in out and out.count("g" * 104 + "...~") == 2  # the generations table and the report line
    assert max(len(line) for line in out.splitlines()) < 1000  # the longest: a report path (folder name <= 200)


def test_assign_names_the_line_of_a_bad_group_in_json_lines(tmp_path, capsys):
    groups = tmp_path / "groups.jsonl"
    good, bad = '{"topics": {"t": 2}, "members": {"m": {"topics": ["t"]}}}', '{"topics": {"t": 0}, "members": {}}'
    groups.write_text(f"{good}\n{bad}\n")
    assert main(["assign", "--strategy", "range", str(groups)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # all groups or none
    assert captured.err == f"rebalance assign: error: {groups}:2: topics.t: partition count must be positive, got 0\n"

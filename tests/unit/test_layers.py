"""Layer rules: executor kernels import only the pure domain and NumPy / pandas / pyarrow; DAG files parse light."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KERNELS = sorted(p.stem for p in (REPO / "jobs" / "kernels").glob("*.py") if p.stem != "__init__")

# What a Spark worker does not have: the lake, Kafka clients, Airflow, GX, numba (planner.hashing falls back to
# NumPy without it), and every driver-side part of `jobs`.
FORBIDDEN = (
    "numba",
    "deltalake",
    "kafka",
    "confluent_kafka",
    "airflow",
    "great_expectations",
    "jobs.io",
    "jobs.steps",
    "jobs.tables",
    "jobs.demo",
    "jobs.cli",
    "jobs.context",
    "jobs.pipeline",
    "jobs.config",
)


def _import_with_forbidden(module: str, forbidden: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    """Import `module` in a fresh interpreter where importing any `forbidden` package fails loudly."""
    code = textwrap.dedent(
        f"""
        import importlib, sys
        FORBIDDEN = {forbidden!r}

        class Deny:
            def find_spec(self, name, path=None, target=None):
                if any(name == f or name.startswith(f + ".") for f in FORBIDDEN):
                    raise ImportError(f"forbidden import {{name}}")
                return None

        sys.meta_path.insert(0, Deny())
        importlib.import_module({module!r})
        """
    )
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)


def test_the_kernel_folder_is_not_empty() -> None:
    assert {"candidates", "key_skew", "samples"} <= set(KERNELS)


@pytest.mark.parametrize("kernel", KERNELS)
def test_kernels_import_only_the_pure_domain(kernel: str) -> None:
    result = _import_with_forbidden(f"jobs.kernels.{kernel}", FORBIDDEN)
    assert result.returncode == 0, result.stderr[-2000:]


def test_the_rule_catches_a_forbidden_import() -> None:
    result = _import_with_forbidden("jobs.steps.plan", FORBIDDEN)
    assert result.returncode != 0 and "forbidden import" in result.stderr


# The floors of `jobs`, lowest first: a module imports (at any depth, deferred imports included) only from its own
# floor and those below. planner/ and schemas/ are below them all.
FLOORS = (
    ("jobs.kernels", "jobs.config", "jobs.terminal"),
    ("jobs.io",),
    ("jobs.context",),
    ("jobs.apply", "jobs.report", "jobs.tables"),
    ("jobs.steps",),
    ("jobs.pipeline", "jobs.what_if_answer"),
    ("jobs.cli", "jobs.airflow", "jobs.demo", "jobs.spark_archive"),
)


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _imports(path: Path, top: str = "jobs") -> set[str]:
    """Every `<top>...` module a file imports (`top` itself included), deferred imports inside functions too."""
    import ast

    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [f"{top}.{a.name}" for a in node.names] if node.module == top else [node.module]
            found.update(m for m in modules if m == top or m.startswith(f"{top}."))
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name == top or a.name.startswith(f"{top}."))
    return found


# The product's packages, lowest first: the pure domain, the contracts, the jobs, the DAG files.
PRODUCT = ("planner", "schemas", "jobs", "dags")


def test_no_import_in_the_product_runs_back_up_a_package() -> None:
    upward = []
    for level, package in enumerate(PRODUCT):
        for f in sorted((REPO / package).rglob("*.py")):
            upward += [
                f"{f.relative_to(REPO)} imports {m}" for higher in PRODUCT[level + 1 :] for m in _imports(f, higher)
            ]
    assert not upward, "\n".join(sorted(upward))


def test_no_import_in_jobs_runs_back_up_a_floor() -> None:
    floor_of = {package: i for i, packages in enumerate(FLOORS) for package in packages}
    files = sorted((REPO / "jobs").rglob("*.py"))
    unplaced = (
        {_package(".".join(f.relative_to(REPO).with_suffix("").parts)) for f in files}
        - set(floor_of)
        - {"jobs.__init__"}
    )
    assert not unplaced, f"place these in FLOORS: {sorted(unplaced)}"
    upward = []
    for f in files:
        here = _package(".".join(f.relative_to(REPO).with_suffix("").parts))
        if here == "jobs.__init__":
            continue
        upward += [f"{f.relative_to(REPO)} imports {m}" for m in _imports(f) if floor_of[_package(m)] > floor_of[here]]
    assert not upward, "\n".join(sorted(upward))

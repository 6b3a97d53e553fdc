"""The project's top-level packages are its own: no installed distribution provides a module of the same name."""

from __future__ import annotations

import importlib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["planner", "jobs", "schemas"])
def test_top_level_package_is_the_projects_own(name: str):
    assert Path(importlib.import_module(name).__file__).resolve().parent == REPO / name
    assert packages_distributions().get(name, ["rebalance-planner"]) == ["rebalance-planner"]


def test_the_console_script_is_installed():
    from importlib.metadata import entry_points

    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "rebalance"]
    assert script.value == "jobs.cli:main"

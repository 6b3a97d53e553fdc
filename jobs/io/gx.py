"""Great Expectations as the gate runs it: importing GX and validating a frame with a suite (`schemas.quality`)
with its pandas engine, in this process (`validate`) or in a worker process (`jobs.io.gx_worker`, which imports
this module and nothing of the lake or of Spark).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import threading
import types
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from jobs.io.not_installed import kept_out
from planner.errors import SourceError
from schemas.quality import PLAN_KEY, PLAN_SUITE

if TYPE_CHECKING:
    import pandas as pd

DETAIL_ROWS = 20  # failing rows kept per generation and expectation in gate_results.details
SUMMARY = {
    "result_format": "SUMMARY",
    "unexpected_index_column_names": PLAN_KEY,
    "partial_unexpected_count": DETAIL_ROWS,
}

# How a frame is validated: here (`validate`) or in a worker process (`GxWorker.validate`); same arguments.
Validate = Callable[["pd.DataFrame", Mapping[str, Any], Mapping[str, Any]], list[dict[str, Any]]]


# Optional integrations of GX (extras, not requirements) that its import loads when they are installed, and that its
# pandas engine, the gate's, never uses: its SQL data sources, its S3 stores, Spark ML's Bucketizer (histograms on
# Spark). Kept out of its import as if not installed, as GX runs where they are not (its compatibility modules mark
# them not imported). Not all of pyspark: in `rebalance run` GX is imported while the plan step's Spark calls may
# import pyspark's modules on the main thread (the GX worker keeps pyspark out whole).
NOT_NEEDED = ("sqlalchemy", "boto3", "pyspark.ml")
# Imported by GX for its distribution expectations (KL divergence, KS tests) and their charts (altair: 0.2-0.4 s of
# a worker's import), which the plan suite does not use: loaded when first used instead.
ON_FIRST_USE = ("scipy.stats", "altair")
_importing = threading.Lock()  # the gate's background import and a validation's own call take turns


def import_great_expectations() -> None:
    """Import Great Expectations (seconds of module loading: 3.0 -> 1.7 s of CPU in `rebalance run`'s process) with
    its usage analytics off, NOT_NEEDED kept out of the import and ON_FIRST_USE loaded when first used. A module
    this process loaded already (Airflow's sqlalchemy) is GX's to use, and any later import of NOT_NEEDED loads it
    as usual."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    with _importing:
        if "great_expectations.expectations" in sys.modules:
            return
        for name in ON_FIRST_USE:
            import_on_first_use(name)
        with kept_out(NOT_NEEDED):
            import great_expectations.expectations  # noqa: F401


def import_on_first_use(name: str) -> None:
    """Make module `name` load when one of its attributes is first read, not when it is imported (nothing when it is
    loaded already). A submodule (`package.module`) loads through importlib's LazyLoader, set as its package's
    attribute too: `from package import module` then takes it as it is, where Python 3.11's import machinery would
    read its `__spec__`, which loads it. `import name` does that read for a top-level module: it gets a stand-in
    (`OnFirstUse`) instead."""
    if name in sys.modules:
        return
    package, _, module_name = name.rpartition(".")
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return  # not installed: an import of it fails as it would have
    if not package:
        sys.modules[name] = OnFirstUse(name, spec)
        return
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    setattr(sys.modules[package], module_name, module)


class OnFirstUse(types.ModuleType):
    """A top-level module's stand-in in `sys.modules` until an attribute is read from it: then the module is imported
    (replacing the stand-in there) and every attribute read through the stand-in is the module's."""

    def __init__(self, name: str, spec: importlib.machinery.ModuleSpec) -> None:
        super().__init__(name)
        self.__spec__ = spec

    def __getattr__(self, attribute: str) -> Any:
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), attribute)


def validate(
    frame: pd.DataFrame, suite: Mapping[str, Any] = PLAN_SUITE, result_format: Mapping[str, Any] = SUMMARY
) -> list[dict[str, Any]]:
    """Run the suite with Great Expectations' pandas engine; one result per expectation: verdict and, unless the
    result format is BOOLEAN_ONLY, the unexpected count and the first unexpected rows (DETAIL_ROWS of them)."""
    import_great_expectations()
    import great_expectations as gx
    import great_expectations.expectations as gxe
    from great_expectations.core.expectation_suite import ExpectationSuite
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    batch = (
        context.data_sources.add_pandas("lake")
        .add_dataframe_asset("plan_check")
        .add_batch_definition_whole_dataframe("run")
    )
    expectations = []
    for spec in suite["expectations"]:
        cls = next(c for c in vars(gxe).values() if getattr(c, "expectation_type", None) == spec["type"])
        expectations.append(cls(**spec["kwargs"]))
    gx_suite = context.suites.add(ExpectationSuite(name=suite["name"], expectations=expectations))
    definition = context.validation_definitions.add(
        gx.ValidationDefinition(name=suite["name"], data=batch, suite=gx_suite)
    )
    outcome = definition.run(batch_parameters={"dataframe": frame}, result_format=dict(result_format))
    rows = []
    for r in outcome.results:
        config = r.expectation_config
        if config is None:  # GX attaches it to every result of a suite run; without it the row would name nothing
            raise SourceError("Great Expectations returned a validation result without its expectation")
        rows.append(
            {
                "expectation": expectation_name(config.type, config.kwargs),
                "type": config.type,
                "kwargs": dict(config.kwargs),
                "success": bool(r.success),
                "unexpected_count": r.result.get("unexpected_count") or 0,
                "unexpected": r.result.get("partial_unexpected_index_list") or [],
            }
        )
    return rows


def expectation_name(kind: str, kwargs: Mapping[str, Any]) -> str:
    """A readable, unique expectation label such as `expect_column_values_to_not_be_null(member)`."""
    target = kwargs.get("column") or ",".join(kwargs.get("column_list") or [])
    return f"{kind}({target})"

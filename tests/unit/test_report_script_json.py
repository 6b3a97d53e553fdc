"""A chart's data as the report writes it into a script element: JSON that parses back, and nothing that ends it."""

from __future__ import annotations

import json
import math

import pytest

from jobs.report.html import _script_json


@pytest.mark.parametrize(
    "value",
    [
        {"x": [0.1 + 0.2, 1e-05, 1e22, -0.0, 3], "name": "payments"},
        {"text": "grüppe </script><!-- ünïcode", "y": list(range(5))},
        {"text": "a lone surrogate \ud800 from Kafka </b>", "y": [1.5]},  # msgspec refuses it: the stdlib's then
    ],
)
def test_the_json_parses_back_to_the_value_and_cannot_end_the_script(value: dict) -> None:
    text = _script_json(value)
    assert not {"<", ">", "/"} & set(text)
    assert json.loads(text) == value


def test_nan_and_infinities_are_null_as_plotly_writes_them() -> None:
    value = {"y": [1.0, math.nan, math.inf, -math.inf], "label": "NaN Infinity"}
    assert json.loads(_script_json(value)) == {"y": [1.0, None, None, None], "label": "NaN Infinity"}
    lone = {"y": [math.nan], "label": "\udfff"}
    assert json.loads(_script_json(lone)) == {"y": [None], "label": "\udfff"}

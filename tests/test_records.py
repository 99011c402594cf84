"""The one serialiser: dataclass fields in order, None fields omitted where asked, numpy as Python."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from specsim.records import OMIT_NONE, to_record


@dataclass(frozen=True)
class _Inner:
    gain: float
    tau: dict[str, float] | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True)
class _Outer:
    name: str
    cases: tuple[_Inner, ...]
    table: dict[int, float]
    arr: np.ndarray
    maybe: int | None = None


def test_fields_in_order_nested_and_json_ready() -> None:
    rec = to_record(_Outer("x", (_Inner(np.float64(1.5)), _Inner(2.0, {"a": 3.0})), {1: np.float32(0.5)},
                           np.arange(3)))
    assert list(rec) == ["name", "cases", "table", "arr", "maybe"]  # declared order; None kept by default
    assert rec["cases"] == [{"gain": 1.5}, {"gain": 2.0, "tau": {"a": 3.0}}]  # omitted only while None
    assert type(rec["cases"][0]["gain"]) is float and type(rec["table"][1]) is float and rec["arr"] == [0, 1, 2]
    assert json.loads(json.dumps(rec)) == {**rec, "table": {"1": 0.5}}

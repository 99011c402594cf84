"""The bundled profiles' all-to-all parameters against NVIDIA's DeepEP tables (aiconfigurator-core)."""

from __future__ import annotations

import pytest

pytest.importorskip("aiconfigurator_core")
pytest.importorskip("pyarrow")

from specsim.calibration.alltoall import alltoall_rows, fit_alltoall, score_alltoall
from specsim.cost.aiconfigurator import alltoall_tables
from specsim.cost.hardware import load_hardware

COVERED = ("h100-sxm", "h200", "b200", "b300", "gb200", "gb300")


def test_tables_tidy() -> None:
    df = alltoall_tables(["h200_sxm"])
    assert {"sglang", "vllm", "trtllm"} <= set(df["framework"])
    assert set(df["mode"]) == {"ll", "normal"} and set(df["phase"]) == {"dispatch", "combine"}
    sg = df[(df["framework"] == "sglang") & (df["node_num"] == 1)]
    assert set(sg["ep"]) == {8}
    assert set(sg[sg["phase"] == "dispatch"]["dtype"]) == {"fp8"}
    assert (df["time_s"] > 0).all() and (df["time_s"] < 1).all()


@pytest.mark.parametrize("name", COVERED)
def test_bundled_parameters_within_floor(name: str) -> None:
    hw = load_hardware(name)
    rep = score_alltoall(hw, alltoall_rows(hw))
    held = rep[(rep["framework"] == "sglang") & (rep["split"] == "held-out")]
    for mode in ("ll", "normal"):
        sel = held[held["mode"] == mode]
        assert len(sel) == 3, (name, mode)  # dispatch, combine, total
        assert (sel["median"] <= 15.0).all(), (name, mode, sel.to_dict("records"))


def test_refit_reproduces_bundled_parameters() -> None:
    hw = load_hardware("h200")
    fitted = fit_alltoall(hw)
    for mode, params in hw.interconnect.alltoall.items():
        assert fitted.interconnect.alltoall[mode] == pytest.approx(params, rel=0.02)

"""The bundled profiles' all-to-all parameters against NVIDIA's tables (aiconfigurator-core): DeepEP's
kernels on SGLang's tables, vLLM's and TensorRT-LLM's DeepEP paths on their moe_a2a tables."""

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


#: Per-phase held-out medians of vLLM's eager op that its own noise puts above the 15% floor (the
#: dispatch + combine total, what the cost model prices, stays within it): GB200 / GB300 LL combine
#: swings 58-110 us with no trend over 1-48 tokens; GB200 HT dispatch barely grows with hidden size
#: (3072 vs 7168: 15.2 vs 16.1 ms at 65536 tokens), which DeepEP's efficiency cap cannot follow.
PHASE_SLACK = {("gb200", "vllm", "ll", "combine"): 20.0, ("gb300", "vllm", "ll", "combine"): 20.0,
               ("gb200", "vllm", "normal", "dispatch"): 20.0}


@pytest.mark.parametrize("name", COVERED)
def test_bundled_parameters_within_floor(name: str) -> None:
    """Issue 20's floor: held-out median |error| of dispatch + combine <= 15% per GPU, framework and
    mode; each phase too, but for the few cells of vLLM's noisy eager timings in PHASE_SLACK."""
    hw = load_hardware(name)
    rep = score_alltoall(hw, alltoall_rows(hw))
    held = rep[rep["split"] == "held-out"]
    for framework in ("sglang", "vllm", "trtllm"):
        for mode in ("ll", "normal"):
            sel = held[(held["framework"] == framework) & (held["mode"] == mode)]
            assert len(sel) == 3, (name, framework, mode)  # dispatch, combine, total
            for rec in sel.to_dict("records"):
                cell = (name, framework, mode, rec["phase"])
                floor = 15.0 if rec["phase"] == "total" else PHASE_SLACK.get(cell, 15.0)
                assert rec["median"] <= floor, (name, rec)


def test_score_reports_every_framework_mode_and_split() -> None:
    hw = load_hardware("h200")
    rep = score_alltoall(hw, alltoall_rows(hw))
    assert {"framework", "mode", "phase", "ep", "split", "n", "mape", "median"} <= set(rep.columns)
    keys = set(zip(rep["framework"], rep["mode"], rep["phase"], rep["split"], strict=True))
    for fw in ("sglang", "vllm", "trtllm"):
        for mode in ("ll", "normal"):
            for phase in ("dispatch", "combine", "total"):
                assert {(fw, mode, phase, "fit"), (fw, mode, phase, "held-out")} <= keys


def test_refit_reproduces_bundled_parameters() -> None:
    hw = load_hardware("h200")
    fitted = fit_alltoall(hw)
    for impl, modes in hw.interconnect.alltoall.items():
        for mode, params in modes.items():
            # the YAML keeps 3 significant figures; copy costs below 0.01 ns are written as 0
            assert fitted.interconnect.alltoall[impl][mode] == pytest.approx(params, rel=0.02, abs=1e-11), (impl, mode)

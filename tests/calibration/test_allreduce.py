from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from specsim.calibration.allreduce import fit_allreduce
from specsim.cost import roofline as rl
from specsim.cost.hardware import load_hardware
from specsim.errors import SpecsimError
from tests.calibration._synthetic import allreduce_rows


def test_allreduce_fit_recovers_per_world_size_figures() -> None:
    base = load_hardware("a100-sxm-80gb")
    table = {2: (40e-6, 170e9, 1.0), 4: (15e-6, 280e9, 0.5), 8: (20e-6, 250e9, 2.5)}
    truth = dataclasses.replace(base, interconnect=dataclasses.replace(base.interconnect,
                                                                       allreduce_by_world_size=table))
    df = allreduce_rows(truth, noise=0.01)
    fitted = fit_allreduce(df, base).interconnect.allreduce_by_world_size
    for n, (lat, bw, p) in table.items():
        got = fitted[n]
        assert got[0] == pytest.approx(lat, rel=0.1) and got[1] == pytest.approx(bw, rel=0.05)
        assert got[2] == pytest.approx(p, rel=0.15)
    # only tiny messages: the bandwidth is not in the data
    with pytest.raises(SpecsimError, match="too small to determine bus bandwidth"):
        fit_allreduce(df[df["bytes"] < 8192], base)


def test_allreduce_plain_formula_without_table() -> None:
    hw = load_hardware("h100-pcie")  # no per-world-size table: latency + 2(n-1)/n * bytes / busbw
    ic = hw.interconnect
    plain = ic.allreduce_latency_s + 2 * 1 / 2 * 1e6 / ic.allreduce_busbw_bytes_per_s
    assert rl.allreduce_time_s(1e6, 2, hw) == pytest.approx(plain)
    h100 = load_hardware("h100-sxm")  # its table: a fitted hump (p != 1) for 2 and 4 GPUs
    lat, bw, p = h100.interconnect.allreduce_by_world_size[2]
    plain = lat + 1e6 / bw
    assert rl.allreduce_time_s(1e6, 2, h100) == pytest.approx(rl._join(np.array(lat), np.array(1e6 / bw), p))
    assert rl.allreduce_time_s(1e6, 2, h100) != pytest.approx(plain)


def test_allreduce_fitted_per_implementation() -> None:
    base = load_hardware("h100-sxm")
    graph = {8: (15e-6, 450e9, 0.6)}
    custom = {8: (4e-6, 400e9, 0.6)}
    truth = dataclasses.replace(base, interconnect=dataclasses.replace(
        base.interconnect, allreduce_by_implementation={"nccl_graph": graph, "custom": custom}))
    rows = []
    for impl in ("nccl_graph", "custom"):
        d = allreduce_rows(truth, noise=0.0)
        d = d[d["world_size"] == 8].assign(impl=impl)
        d["time_ms"] = rl.allreduce_time_s(d["bytes"], 8, truth, impl) * 1e3
        rows.append(d)
    fitted = fit_allreduce(pd.concat(rows, ignore_index=True), base).interconnect
    for impl, table in (("nccl_graph", graph), ("custom", custom)):
        got = fitted.allreduce_by_implementation[impl][8]
        assert got[0] == pytest.approx(table[8][0], rel=0.1) and got[1] == pytest.approx(table[8][1], rel=0.1)
    assert fitted.allreduce_by_world_size == base.interconnect.allreduce_by_world_size  # eager NCCL untouched

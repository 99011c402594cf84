"""The MoE all-to-all cost (specsim/cost/alltoall.py)."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import numpy as np
import pytest

from specsim.cost.alltoall import (
    ALLTOALL_IMPLEMENTATIONS,
    ALLTOALL_MODES,
    alltoall_params,
    alltoall_phases_s,
    alltoall_time_s,
)
from specsim.cost.hardware import load_hardware
from specsim.errors import SpecsimError


@pytest.mark.parametrize("mode", ALLTOALL_MODES)
def test_monotone_in_tokens_and_ep(mode: str) -> None:
    hw = load_hardware("h200")
    tokens = np.array([1, 16, 128, 1024, 8192])
    t = alltoall_time_s(hw, tokens, 7168, 8, 8, mode)
    assert t.shape == tokens.shape and np.all(np.diff(t) > 0)
    by_ep = [float(alltoall_time_s(hw, 256, 7168, 8, ep, mode)) for ep in (2, 4, 8, 16)]
    assert all(b > a for a, b in itertools.pairwise(by_ep))


def test_zero_at_ep_one() -> None:
    hw = load_hardware("h100-sxm")
    assert np.all(alltoall_time_s(hw, [0, 5, 500], 4096, 8, 1) == 0)
    assert np.all(alltoall_time_s(hw, [0, 5, 500], 4096, 8, 0, "normal") == 0)


def test_bytes_term_by_hand() -> None:
    """LL, EP 8, 1024 tokens x top-8, hidden 7168: dispatch sends 1024 x 8 x 7/8 copies of
    7168 + 7168/128 x 4 + 16 = 7408 bytes; combine 7168 x 2 bytes; each over efficiency x 450 GB/s."""
    hw = load_hardware("h200")
    lat_d, eff_d, lat_c, eff_c = alltoall_params(hw, "ll")
    d, c = alltoall_phases_s(hw, 1024, 7168, 8, 8, "ll")
    copies = 1024 * 8 * 7 / 8
    assert float(d) == pytest.approx(lat_d + copies * 7408 / (eff_d * 450e9))
    assert float(c) == pytest.approx(lat_c + copies * 14336 / (eff_c * 450e9))
    assert float(alltoall_time_s(hw, 1024, 7168, 8, 8)) == pytest.approx(float(d) + float(c))
    # normal mode: one copy per destination rank, 7 x (1 - (7/8)^8) of them
    _, cn = alltoall_phases_s(hw, 1024, 7168, 8, 8, "normal", 1.0, 2.0)
    _, _, lat_n, eff_n = alltoall_params(hw, "normal")
    assert float(cn) == pytest.approx(lat_n + 1024 * 7 * (1 - (7 / 8) ** 8) * 14336 / (eff_n * 450e9))


def test_bad_mode_raises() -> None:
    with pytest.raises(SpecsimError, match="mode"):
        alltoall_time_s(load_hardware("h200"), 8, 7168, 8, 8, mode="fast")


def test_bad_implementation_raises() -> None:
    with pytest.raises(SpecsimError, match=r"unknown all-to-all implementation 'pplx'.*deepep, vllm, trtllm"):
        alltoall_time_s(load_hardware("h200"), 8, 7168, 8, 8, "ll", impl="pplx")


@pytest.mark.parametrize("name", ["h100-sxm", "h200", "b200", "b300", "gb200", "gb300", "a100-sxm-80gb", "mi300x"])
@pytest.mark.parametrize("impl", ALLTOALL_IMPLEMENTATIONS[1:])
@pytest.mark.parametrize("mode", ALLTOALL_MODES)
def test_framework_never_cheaper_than_raw_deepep(name: str, impl: str, mode: str) -> None:
    """vLLM's / TensorRT-LLM's path: DeepEP's kernel (efficiency capped at DeepEP's) plus an overhead,
    per phase, at every size, payload and EP."""
    hw = load_hardware(name)
    tokens = np.array([0, 1, 8, 64, 256, 1024, 8192, 65536])
    for hidden, top_k, ep, width in ((7168, 8, 8, 1.0), (3072, 6, 4, 2.0), (7168, 8, 16, 0.5625)):
        raw = alltoall_phases_s(hw, tokens, hidden, top_k, ep, mode, width, 2.0)
        fw = alltoall_phases_s(hw, tokens, hidden, top_k, ep, mode, width, 2.0, impl)
        for r, f in zip(raw, fw, strict=True):
            assert np.all(f >= r * (1 - 1e-12)), (name, impl, mode, hidden)
    small = float(alltoall_time_s(hw, 1, 7168, 8, 8, mode, impl=impl))
    assert small > float(alltoall_time_s(hw, 1, 7168, 8, 8, mode)) + 20e-6  # the framework's overhead


def test_framework_phase_by_hand() -> None:
    """A framework phase: (overhead^p + kernel^p)^(1/p), the kernel DeepEP's latency + copies x
    (copy cost + message / (min(efficiency, DeepEP's) x 450 GB/s))."""
    hw = load_hardware("h200")
    lat_d, eff_d, lat_c, eff_c = alltoall_params(hw, "ll")
    o_d, f_d, o_c, f_c, p, k_d, k_c = alltoall_params(hw, "ll", "vllm")
    d, c = alltoall_phases_s(hw, 128, 7168, 8, 8, "ll", 2.0, 2.0, "vllm")
    copies = 128 * 8 * 7 / 8
    kernel_d = lat_d + copies * (k_d + (7168 * 2 + 16) / (min(f_d, eff_d) * 450e9))
    kernel_c = lat_c + copies * (k_c + 7168 * 2 / (min(f_c, eff_c) * 450e9))
    assert float(d) == pytest.approx((o_d ** p + kernel_d ** p) ** (1 / p))
    assert float(c) == pytest.approx((o_c ** p + kernel_c ** p) ** (1 / p))
    assert np.all(alltoall_time_s(hw, [5, 500], 7168, 8, 1, impl="trtllm") == 0)


def test_fallback_borrows_nearest_covered_fit() -> None:
    """A GPU without tables: H100-SXM's latency and efficiency over its own link bandwidth."""
    h100, a100 = load_hardware("h100-sxm"), load_hardware("a100-sxm-80gb")
    assert not a100.interconnect.alltoall
    assert alltoall_params(a100, "ll") == h100.interconnect.alltoall["deepep"]["ll"]
    assert alltoall_params(a100, "normal", "trtllm") == h100.interconnect.alltoall["trtllm"]["normal"]
    slow = dataclasses.replace(h100, interconnect=dataclasses.replace(
        h100.interconnect, link_bw_bytes_per_s=a100.interconnect.link_bw_bytes_per_s))
    assert float(alltoall_time_s(a100, 512, 7168, 8, 8)) == pytest.approx(float(alltoall_time_s(slow, 512, 7168, 8, 8)))


def test_xgmi_uses_links_to_peers_only() -> None:
    """MI300X: 7 xGMI links of 64 GB/s; an EP-4 group uses 3 of them."""
    hw = load_hardware("mi300x")
    big = 1e6  # the bytes term dominates
    t4 = float(alltoall_time_s(hw, big, 7168, 8, 4)) / (3 / 4)
    t8 = float(alltoall_time_s(hw, big, 7168, 8, 8)) / (7 / 8)
    assert t4 / t8 == pytest.approx(7 / 3, rel=1e-3)


def test_yaml_round_trip_and_bad_values() -> None:
    import yaml

    from specsim.cost.hardware import parse_hardware

    hw = load_hardware("h200")
    data = hw.to_yaml_dict()
    back = parse_hardware(dict(data), "x.yaml").interconnect.alltoall
    assert set(back) == set(hw.interconnect.alltoall) == set(ALLTOALL_IMPLEMENTATIONS)
    for impl, modes in hw.interconnect.alltoall.items():
        assert set(back[impl]) == set(modes) == set(ALLTOALL_MODES)
        for mode, params in modes.items():
            assert back[impl][mode] == pytest.approx(params)
    raw = yaml.safe_load(Path(hw.source_path).read_text())
    bad = yaml.safe_load(Path(hw.source_path).read_text())
    bad["interconnect"]["alltoall"]["ll"]["dispatch_efficiency"] = 1.5
    with pytest.raises(SpecsimError, match=r"prof.yaml: interconnect.alltoall.ll.*dispatch_efficiency"):
        parse_hardware(bad, "prof.yaml")
    bad = yaml.safe_load(Path(hw.source_path).read_text())
    bad["interconnect"]["alltoall"]["vllm"]["normal"]["sharpness"] = 0.5
    with pytest.raises(SpecsimError, match=r"prof.yaml: interconnect.alltoall.vllm.normal.*'sharpness' must be >= 1"):
        parse_hardware(bad, "prof.yaml")
    bad = yaml.safe_load(Path(hw.source_path).read_text())
    bad["interconnect"]["alltoall"]["trtllm"]["ll"]["combine_overhead_us"] = -1
    with pytest.raises(SpecsimError, match=r"prof.yaml: interconnect.alltoall.trtllm.ll.*combine_overhead_us"):
        parse_hardware(bad, "prof.yaml")
    bad = yaml.safe_load(Path(hw.source_path).read_text())
    bad["interconnect"]["alltoall"]["trtllm"] = {"fast": {}}
    with pytest.raises(SpecsimError, match=r"prof.yaml: interconnect.alltoall.trtllm.*unknown mode 'fast'"):
        parse_hardware(bad, "prof.yaml")
    # the copy costs may be left out (0)
    del raw["interconnect"]["alltoall"]["vllm"]["ll"]["dispatch_copy_ns"]
    assert parse_hardware(raw, "prof.yaml").interconnect.alltoall["vllm"]["ll"][5] == 0.0
    raw["interconnect"]["alltoall"] = {"fast": {}}
    with pytest.raises(SpecsimError, match=r"prof.yaml: interconnect.alltoall.*unknown mode or implementation 'fast'"):
        parse_hardware(raw, "prof.yaml")

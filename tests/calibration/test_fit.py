from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specsim.calibration import fit as cal
from specsim.cost import roofline as rl
from specsim.cost.hardware import load_hardware
from specsim.cost.measurements import check_measurements
from specsim.errors import SpecsimError

SHAPES = [(4096, 4096), (12288, 4096), (4096, 11008), (28672, 8192), (1280, 8192), (8192, 8192), (4096, 512),
          (8192, 1024)]
TOKENS = [1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192]


def _gemm_rows(hw, noise: float, seed: int = 0) -> pd.DataFrame:
    """Measurements made by the cost model itself on `hw`, with relative Gaussian noise."""
    rows = [{"op": "gemm", "device": hw.name, "dtype": "bf16", "tokens": m, "d_in": k, "d_out": n, "time_ms": 1.0}
            for n, k in SHAPES for m in TOKENS]
    df = check_measurements(pd.DataFrame(rows), "synthetic")
    true_ms = rl.gemm_time_s(df["tokens"], df["d_out"], df["d_in"], hw)[0] * 1e3
    df["time_ms"] = true_ms * (1 + np.random.default_rng(seed).normal(0, noise, len(df)))
    df["true_ms"] = true_ms
    return df


@pytest.fixture(scope="module")
def truth():
    # L2 out of the way, so the five core parameters are each identifiable
    return load_hardware("h100-sxm").with_efficiency(
        gemm_compute=0.78, memory=0.88, kernel_overhead_us=5.0, ridge_sharpness=2.0, cta_k_overhead=80.0,
        l2_bw_tb_per_s=40.0, power_throttle=0.0)


def test_fit_recovers_known_parameters_from_noisy_synthetic_rows(truth) -> None:
    df = _gemm_rows(truth, noise=0.015)
    params = ["gemm_compute", "memory", "kernel_overhead_us", "ridge_sharpness", "cta_k_overhead"]
    start = truth.with_efficiency(gemm_compute=0.9, memory=0.75, kernel_overhead_us=6.5, ridge_sharpness=1.6,
                                  cta_k_overhead=112.0)
    fitted = cal.fit_efficiency(df, start, params)
    got = cal.fitted_values(fitted)
    for p, tol in (("gemm_compute", 0.02), ("memory", 0.02), ("kernel_overhead_us", 0.05),
                   ("ridge_sharpness", 0.05), ("cta_k_overhead", 0.15)):
        assert got[p] == pytest.approx(getattr(truth.efficiency, p), rel=tol), p
    assert got["attention_compute"] == truth.efficiency.attention_compute  # not fitted, not touched


def test_fit_of_every_gemm_parameter_reproduces_the_timings(truth) -> None:
    """The full tile model has trade-offs between parameters; what must come back is the timings."""
    hw = truth.with_efficiency(l2_bw_tb_per_s=10.0, small_tile_efficiency=0.7, power_throttle=0.2)
    df = _gemm_rows(hw, noise=0.01, seed=3)
    start = load_hardware("h100-sxm")
    # bf16 rows of cold weights: the L2-residency, fp8 and dequantisation parameters move nothing
    params = [p for p in cal.GEMM_PARAMS if p not in ("l2_resident_frac", "l2_stream_tb_per_s", "fp8_compute",
                                                     "dequant_tera_per_s", "splitk_overhead_us")]
    fitted = cal.fit_efficiency(df, start, params, starts=2)
    pred = rl.gemm_time_s(df["tokens"], df["d_out"], df["d_in"], fitted)[0] * 1e3
    assert float(np.mean(np.abs(pred / df["true_ms"] - 1))) < 0.03  # 1% noise; 14 parameters trade off
    assert float(np.mean(np.abs(rl.gemm_time_s(df["tokens"], df["d_out"], df["d_in"], start)[0] * 1e3
                                / df["true_ms"] - 1))) > 0.05  # the start was really off


def test_refuses_parameters_the_rows_cannot_determine(truth) -> None:
    df = _gemm_rows(truth, noise=0.0)
    with pytest.raises(SpecsimError, match="cannot determine attention_compute"):
        cal.fit_efficiency(df, truth, ["gemm_compute", "attention_compute"])
    short = df[df["tokens"] <= 64]  # memory-bound rows only: nothing throttles, L2 never binds
    with pytest.raises(SpecsimError, match=r"cannot determine power_throttle \(moves predictions by at most"):
        cal.fit_efficiency(short, truth, ["memory", "power_throttle"])
    # the same parameter among the defaults is left at the base value instead of failing
    fitted, kept = cal.fit_efficiency_params(short, truth, ["memory", "power_throttle"], lenient=["power_throttle"])
    assert kept == ["memory"] and fitted.efficiency.power_throttle == truth.efficiency.power_throttle
    with pytest.raises(SpecsimError, match="unknown efficiency parameter"):
        cal.fit_efficiency(df, truth, ["warp_speed"])


def test_a_parameter_fitted_onto_its_bound_is_kept(truth) -> None:
    """Rows made with kernel_overhead_us at its lower bound: the fit drives it there from 5 us, and the
    check that the rows determine it (moving it must move predictions) steps inwards from the bound
    rather than scaling a value that scaling cannot move, so the fitted value is kept, not the start."""
    lo = cal.BOUNDS["kernel_overhead_us"][0]
    df = _gemm_rows(truth.with_efficiency(kernel_overhead_us=lo), noise=0.0)
    start = truth.with_efficiency(kernel_overhead_us=5.0)
    fitted, kept = cal.fit_efficiency_params(df, start, ["memory", "kernel_overhead_us"])
    assert "kernel_overhead_us" in kept
    assert fitted.efficiency.kernel_overhead_us < 0.5


def _allreduce_rows(hw, noise: float) -> pd.DataFrame:
    sizes = np.unique(np.geomspace(2048, 64 * 2**20, 60).astype(int))
    rows = [{"op": "allreduce", "device": hw.name, "bytes": float(s), "world_size": n, "time_ms": 1.0}
            for n in (2, 4, 8) for s in sizes]
    df = check_measurements(pd.DataFrame(rows), "synthetic")
    t = rl.allreduce_time_s(df["bytes"], df["world_size"], hw) * 1e3
    df["time_ms"] = t * (1 + np.random.default_rng(5).normal(0, noise, len(df)))
    return df


def test_allreduce_fit_recovers_per_world_size_figures() -> None:
    base = load_hardware("a100-sxm-80gb")
    table = {2: (40e-6, 170e9, 1.0), 4: (15e-6, 280e9, 0.5), 8: (20e-6, 250e9, 2.5)}
    truth = dataclasses.replace(base, interconnect=dataclasses.replace(base.interconnect,
                                                                       allreduce_by_world_size=table))
    df = _allreduce_rows(truth, noise=0.01)
    fitted = cal.fit_allreduce(df, base).interconnect.allreduce_by_world_size
    for n, (lat, bw, p) in table.items():
        got = fitted[n]
        assert got[0] == pytest.approx(lat, rel=0.1) and got[1] == pytest.approx(bw, rel=0.05)
        assert got[2] == pytest.approx(p, rel=0.15)
    # only tiny messages: the bandwidth is not in the data
    with pytest.raises(SpecsimError, match="too small to determine bus bandwidth"):
        cal.fit_allreduce(df[df["bytes"] < 8192], base)


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


def test_holdout_selection() -> None:
    df = pd.DataFrame({"model": ["a", "b", "c", "a"], "tp": [1, 2, 2, 8]})
    assert cal.parse_holdout("model=a", df).tolist() == [True, False, False, True]
    assert cal.parse_holdout("model!=a", df).tolist() == [False, True, True, False]
    assert cal.parse_holdout("model=b,c", df).tolist() == [False, True, True, False]
    assert cal.parse_holdout("tp=2", df).tolist() == [False, True, True, False]
    with pytest.raises(SpecsimError, match="no column 'gpu'"):
        cal.parse_holdout("gpu=x", df)
    with pytest.raises(SpecsimError, match="no row has model"):
        cal.parse_holdout("model=z", df)
    with pytest.raises(SpecsimError, match="COLUMN=VALUE"):
        cal.parse_holdout("model", df)


def test_calibrate_reports_fitted_and_held_out_rows_and_writes_a_loadable_profile(truth, tmp_path: Path) -> None:
    df = _gemm_rows(truth, noise=0.01)
    df["shape"] = df["d_out"].astype(int).astype(str) + "x" + df["d_in"].astype(int).astype(str)
    csv = tmp_path / "m.csv"
    df.to_csv(csv, index=False)
    result = cal.calibrate(df, load_hardware("h100-sxm"), params="gemm_compute,memory,kernel_overhead_us",
                           holdout="shape=1280x8192", by="shape")
    rep = result.report.set_index(["rows", "group"])
    assert rep.loc[("fitted", "all"), "n"] == len(df) - len(TOKENS)
    assert rep.loc[("held-out", "all"), "n"] == len(TOKENS)
    for band in ("1-16", "17-128", "129-512", "513-2048", ">2048"):
        assert ("fitted", f"op=gemm tokens={band}") in rep.index
    assert ("held-out", "shape=1280x8192") in rep.index
    prof = cal.fitted_profile(result, csv, "shape=1280x8192", name="mine")
    out = tmp_path / "mine.yaml"
    cal.write_profile(prof, out)
    back = load_hardware(out)
    assert back.name == "mine" and back.efficiency.memory == pytest.approx(prof.efficiency.memory, rel=1e-5)
    assert back.provenance["rows_held_out"] == len(TOKENS) and back.provenance["holdout"] == "shape=1280x8192"
    assert back.provenance["measurements_sha256"] == cal.file_sha256(csv)
    assert "fitted by `specsim calibrate`" in back.efficiency.source
    # a profile that would not load is never written
    bad = dataclasses.replace(prof, efficiency=dataclasses.replace(prof.efficiency, memory=float("nan")))
    with pytest.raises(SpecsimError):
        cal.write_profile(bad, tmp_path / "bad.yaml")
    assert not (tmp_path / "bad.yaml").exists()


def test_noisy_rows_are_dropped_and_other_devices_skipped(truth) -> None:
    df = _gemm_rows(truth, noise=0.0)
    df["std_ms"] = 0.01 * df["time_ms"]
    df.loc[0, "std_ms"] = 3 * df.loc[0, "time_ms"]  # a launch race, not a kernel time
    other = df.iloc[:5].assign(device="a100-sxm-80gb")
    result = cal.calibrate(pd.concat([df, other], ignore_index=True), truth, params="memory")
    assert result.dropped_noisy == 1 and result.skipped == {"other devices": 5}
    assert len(result.rows) == len(df) - 1


def test_gemm_model_monotone_in_tokens_anywhere_in_the_fit_bounds() -> None:
    """The fit explores the bounds; every profile it can produce keeps time non-decreasing in M."""
    rng = np.random.default_rng(7)
    base = load_hardware("h100-sxm")
    m = np.arange(1, 4097)
    for _ in range(8):
        hw = base.with_efficiency(**{p: float(rng.uniform(*cal.BOUNDS[p])) for p in cal.GEMM_PARAMS})
        for n, k, g, dtype, wb in ((128, 4096, 1.0, "bf16", 2.0), (28672, 8192, 1.0, "fp8", 1.0),
                                   (1536, 7168, 8.0, "bf16", 0.5)):
            t = rl.gemm_time_s(m, n, k, hw, dtype, wb, groups=g)[0]
            assert np.all(np.diff(t) >= -1e-15), (n, k, g)


def test_calibrated_on_llama2_7b_alone_predicts_the_other_models(vidur_table: pd.DataFrame) -> None:
    """Held-out accuracy when fitting on Llama-2-7B's rows only (README, Calibration). The issue's
    floor is 6% per model and 10% per band; these guards pin what the model reaches today.

    H100's fit (with the power-limit pair) has two basins 4% apart in cost, and which one the fit lands
    in depends on the BLAS kernel: held out, overall 8.1-8.4%, worst model 8.7-9.0%, worst band
    9.7-11.3% (129-512 tokens) under OPENBLAS_CORETYPE=Haswell, SkylakeX and Zen. The bounds sit above
    that measured spread by the spread again; A100 moved by < 0.1 point across kernels."""
    from specsim.cost.hardware import Efficiency

    limits = {"h100-sxm": (8.7, 9.3, 12.9), "a100-sxm-80gb": (6.4, 7.3, 9.8)}
    for device, (overall, per_model, per_band) in limits.items():
        rows = vidur_table[(vidur_table["device"] == device) & (vidur_table["op"] == "gemm")]
        params = "+power_throttle,throttle_tau_ms" if device == "h100-sxm" else None
        # from default efficiencies: the bundled ones were fitted to every model, held-out ones included
        clean = dataclasses.replace(load_hardware(device), efficiency=Efficiency())
        result = cal.calibrate(rows, clean, params=params, holdout="model!=Llama-2-7b-hf", by="model")
        rep = result.report.set_index(["rows", "group"])["mape_pct"]
        assert rep[("held-out", "all")] <= overall, device
        held = rep.loc["held-out"]
        models = held[held.index.str.match(r"model=[^ ]+$")]
        assert len(models) >= 5 and models.max() <= per_model, (device, models.to_dict())
        bands = held[held.index.str.startswith("op=gemm tokens=")]
        assert len(bands) == 5 and bands.max() <= per_band, (device, bands.to_dict())


def test_allreduce_fitted_to_the_reference_network_files(vidur_table: pd.DataFrame) -> None:
    """Issue floor: all-reduce MAPE <= 10% for 2, 4 and 8 GPUs over messages up to 64 MiB."""
    for device in ("h100-sxm", "a100-sxm-80gb"):
        rows = vidur_table[(vidur_table["device"] == device) & (vidur_table["op"] == "allreduce")]
        result = cal.calibrate(rows, load_hardware(device))
        rep = result.report.set_index(["rows", "group"])["mape_pct"]
        for n in (2, 4, 8):
            assert rep[("fitted", f"op=allreduce world_size={n}")] <= 10.0, (device, n)
        assert result.dropped_noisy < 0.01 * len(rows)  # only rows whose std exceeds their median


def test_fits_never_silently_mix_kernels(truth) -> None:
    df = _gemm_rows(truth, noise=0.0)
    df["framework"], df["kernel"] = "vllm", "torch.nn.functional.linear"
    other = df.iloc[:40].assign(framework="sglang", kernel="sglang_torch_linear")
    both = pd.concat([df, other], ignore_index=True)
    with pytest.raises(SpecsimError, match=r"the rows mix kernels \(gemm bf16: sglang/sglang_torch_linear, "
                                           r"vllm/torch.nn.functional.linear\)"):
        cal.calibrate(both, truth, params="memory")
    assert len(cal.calibrate(both, truth, params="memory", framework="vllm").rows) == len(df)
    assert len(cal.calibrate(both, truth, params="memory", kernel="sglang_").rows) == 40
    assert len(cal.calibrate(both, truth, params="memory", mix_kernels=True).rows) == len(both)
    with pytest.raises(SpecsimError, match="--framework: no row has framework 'trtllm'"):
        cal.calibrate(both, truth, params="memory", framework="trtllm")


def test_allreduce_fitted_per_implementation() -> None:
    base = load_hardware("h100-sxm")
    graph = {8: (15e-6, 450e9, 0.6)}
    custom = {8: (4e-6, 400e9, 0.6)}
    truth = dataclasses.replace(base, interconnect=dataclasses.replace(
        base.interconnect, allreduce_by_implementation={"nccl_graph": graph, "custom": custom}))
    rows = []
    for impl in ("nccl_graph", "custom"):
        d = _allreduce_rows(truth, noise=0.0)
        d = d[d["world_size"] == 8].assign(impl=impl)
        d["time_ms"] = rl.allreduce_time_s(d["bytes"], 8, truth, impl) * 1e3
        rows.append(d)
    fitted = cal.fit_allreduce(pd.concat(rows, ignore_index=True), base).interconnect
    for impl, table in (("nccl_graph", graph), ("custom", custom)):
        got = fitted.allreduce_by_implementation[impl][8]
        assert got[0] == pytest.approx(table[8][0], rel=0.1) and got[1] == pytest.approx(table[8][1], rel=0.1)
    assert fitted.allreduce_by_world_size == base.interconnect.allreduce_by_world_size  # eager NCCL untouched

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest

from specsim.calibration.fit import calibrate
from specsim.calibration.provenance import file_sha256, fitted_profile
from specsim.calibration.writing import write_profile
from specsim.cost.hardware import load_hardware
from specsim.errors import SpecsimError
from tests.calibration._synthetic import TOKENS, gemm_rows


def test_calibrate_reports_fitted_and_held_out_rows_and_writes_a_loadable_profile(truth, tmp_path: Path) -> None:
    df = gemm_rows(truth, noise=0.01)
    df["shape"] = df["d_out"].astype(int).astype(str) + "x" + df["d_in"].astype(int).astype(str)
    csv = tmp_path / "m.csv"
    df.to_csv(csv, index=False)
    result = calibrate(df, load_hardware("h100-sxm"), params="gemm_compute,memory,kernel_overhead_us",
                           holdout="shape=1280x8192", by="shape")
    rep = result.report.set_index(["rows", "group"])
    assert rep.loc[("fitted", "all"), "n"] == len(df) - len(TOKENS)
    assert rep.loc[("held-out", "all"), "n"] == len(TOKENS)
    for band in ("1-16", "17-128", "129-512", "513-2048", ">2048"):
        assert ("fitted", f"op=gemm tokens={band}") in rep.index
    assert ("held-out", "shape=1280x8192") in rep.index
    prof = fitted_profile(result, csv, "shape=1280x8192", name="mine")
    out = tmp_path / "mine.yaml"
    write_profile(prof, out)
    back = load_hardware(out)
    assert back.name == "mine" and back.efficiency.memory == pytest.approx(prof.efficiency.memory, rel=1e-5)
    assert back.provenance["rows_held_out"] == len(TOKENS) and back.provenance["holdout"] == "shape=1280x8192"
    assert back.provenance["measurements_sha256"] == file_sha256(csv)
    assert "fitted by `specsim calibrate`" in back.efficiency.source
    # a profile that would not load is never written
    bad = dataclasses.replace(prof, efficiency=dataclasses.replace(prof.efficiency, memory=float("nan")))
    with pytest.raises(SpecsimError):
        write_profile(bad, tmp_path / "bad.yaml")
    assert not (tmp_path / "bad.yaml").exists()


@pytest.mark.parametrize("device", ["h100-sxm", "a100-sxm-80gb"])  # one unit of work each (tests/_xdist.py)
def test_calibrated_on_llama2_7b_alone_predicts_the_other_models(vidur_table: pd.DataFrame, device: str) -> None:
    """Held-out accuracy when fitting on Llama-2-7B's rows only (README, Calibration). The issue's
    floor is 6% per model and 10% per band; these guards pin what the model reaches today.

    H100's fit (with the power-limit pair) has two basins 4% apart in cost, and which one the fit lands
    in depends on the BLAS kernel: held out, overall 8.1-8.4%, worst model 8.7-9.0%, worst band
    9.7-11.3% (129-512 tokens) under OPENBLAS_CORETYPE=Haswell, SkylakeX and Zen. The bounds sit above
    that measured spread by the spread again; A100 moved by < 0.1 point across kernels."""
    from specsim.cost.hardware import Efficiency

    limits = {"h100-sxm": (8.7, 9.3, 12.9), "a100-sxm-80gb": (6.4, 7.3, 9.8)}
    overall, per_model, per_band = limits[device]
    rows = vidur_table[(vidur_table["device"] == device) & (vidur_table["op"] == "gemm")]
    params = "+power_throttle,throttle_tau_ms" if device == "h100-sxm" else None
    # from default efficiencies: the bundled ones were fitted to every model, held-out ones included
    clean = dataclasses.replace(load_hardware(device), efficiency=Efficiency())
    result = calibrate(rows, clean, params=params, holdout="model!=Llama-2-7b-hf", by="model")
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
        result = calibrate(rows, load_hardware(device))
        rep = result.report.set_index(["rows", "group"])["mape_pct"]
        for n in (2, 4, 8):
            assert rep[("fitted", f"op=allreduce world_size={n}")] <= 10.0, (device, n)
        assert result.dropped_noisy < 0.01 * len(rows)  # only rows whose std exceeds their median

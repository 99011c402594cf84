from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specsim.cost import roofline as rl
from specsim.cost.hardware import load_hardware
from tests._cli import run


@pytest.fixture(scope="module")
def measurements(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """GEMM and all-reduce rows timed by a slower H100 (the cost model with other efficiencies)."""
    hw = load_hardware("h100-sxm").with_efficiency(gemm_compute=0.7, memory=0.85, kernel_overhead_us=6.0)
    rng = np.random.default_rng(0)
    rows = []
    for model, (n, k) in (("a", (4096, 4096)), ("b", (14336, 4096)), ("c", (8192, 8192))):
        for m in (1, 4, 16, 64, 128, 256, 512, 1024, 2048, 4096):
            t = float(rl.gemm_time_s(m, n, k, hw)[0]) * 1e3
            rows.append({"op": "gemm", "device": "h100-sxm", "dtype": "bf16", "tokens": m, "d_in": k, "d_out": n,
                         "time_ms": t * (1 + rng.normal(0, 0.01)), "model": model})
    for w in (2, 8):
        for s in np.geomspace(4096, 64 * 2**20, 12):
            t = float(rl.allreduce_time_s(s, w, hw)) * 1e3
            rows.append({"op": "allreduce", "device": "h100-sxm", "bytes": s, "world_size": w,
                         "time_ms": t * (1 + rng.normal(0, 0.01))})
    path = tmp_path_factory.mktemp("m") / "m.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_calibrate_writes_profile_figures_and_report(measurements: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "fit.yaml"
    code, stdout, err = run(capsys, "calibrate", str(measurements), "--hardware", "h100-sxm", "-o", str(out),
                            "--holdout", "model=c", "--params", "gemm_compute,memory,kernel_overhead_us,allreduce",
                            "--by", "model", "--format", "json")
    assert code == 0, err
    report = {(r["rows"], r["group"]): r for r in json.loads(stdout)}
    assert report[("fitted", "all")]["mape_pct"] < 3 and report[("held-out", "model=c")]["mape_pct"] < 3
    assert ("fitted", "op=allreduce world_size=8") in report and ("fitted", "op=gemm tokens=1-16") in report
    hw = load_hardware(out)  # every other command accepts it
    assert hw.efficiency.gemm_compute == pytest.approx(0.7, rel=0.05)
    assert hw.efficiency.memory == pytest.approx(0.85, rel=0.05)
    base = load_hardware("h100-sxm").interconnect.allreduce_by_world_size
    table = hw.interconnect.allreduce_by_world_size
    assert 8 in table and 8 not in base and table[2] != base[2] and table[4] == base[4]  # 4 GPUs: no rows, kept
    assert hw.provenance["rows_held_out"] == 10 and hw.provenance["mape_pct_held_out"] < 3
    for fig in ("fit_predicted_vs_measured.png", "fit_error_vs_size.png"):
        assert (tmp_path / fig).stat().st_size > 10_000
    code, stdout, _ = run(capsys, "predict", str(measurements), "--hardware", str(out), "-o", str(tmp_path / "p.csv"))
    assert code == 0 and "mean absolute error" in stdout


@pytest.mark.parametrize(("text", "message"), [
    ("device,tokens\nh100-sxm,1\n", "missing column(s) op, time_ms"),
    ("op,time_ms\n", "no rows"),
    ("op,tokens,d_in,d_out,time_ms\ngemm,1,4096,4096,0.02\ngemm,2,4096,4096,-1\n", "row 3: time_ms must be a positive"),
    ("op,tokens,d_in,d_out,time_ms\ngemm,1,4096,4096,nan\n", "row 2: time_ms must be a positive"),
    ("op,time_ms\nsoftmax,0.1\n", "no rows to calibrate"),
    ("op,tokens,time_ms\ngemm,1,0.1\n", "no row can be predicted"),
])
def test_bad_measurement_files_one_line_exit_2_nothing_written(tmp_path: Path, capsys, text: str,
                                                               message: str) -> None:
    src = tmp_path / "bad.csv"
    src.write_text(text)
    out = tmp_path / "fit.yaml"
    code, _, err = run(capsys, "calibrate", str(src), "--hardware", "h100-sxm", "-o", str(out))
    assert code == 2 and message in err, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ")
    assert not out.exists() and not list(tmp_path.glob("*.png")) and not list(tmp_path.glob(".*tmp"))


def test_bad_options_exit_2(measurements: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "fit.yaml"
    for args, message in (
        (["--params", "attention_compute"], "cannot determine attention_compute"),
        (["--params", "warp"], "--params: unknown parameter(s) warp"),
        (["--holdout", "gpu=x"], "--holdout: no column 'gpu'"),
        (["--holdout", "op=gemm,allreduce"], "holds out every row"),
        (["--ops", "gemm", "--params", "allreduce"], "no allreduce rows"),
        (["--hardware", "h300"], "unknown hardware 'h300'"),
    ):
        argv = ["calibrate", str(measurements), "-o", str(out), *args]
        if "--hardware" not in args:
            argv += ["--hardware", "h100-sxm"]
        code, _, err = run(capsys, *argv)
        assert code == 2 and message in err, (args, err)
    code, _, err = run(capsys, "calibrate", str(measurements), "--hardware", "h100-sxm", "-o", str(tmp_path / "x.txt"))
    assert code == 2 and "must end in .yaml" in err
    assert not out.exists()

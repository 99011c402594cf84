from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from specsim.calibration import bench
from specsim.calibration.bench_backend import Job
from specsim.calibration.bench_shapes import QUICK_TOKENS
from specsim.cost.model import load_model
from tests._cli import run


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[bench.BenchResult, Path]:
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("bench") / "cpu.csv"
    result = bench.run_bench("cpu", load_model("qwen2.5-0.5b"), tp=1, dtype="bf16", quick=True,
                             ops=("gemm", "attention", "memcpy", "peak"), progress=False)
    bench.write_bench(result, out, "bf16")
    return result, out


def test_cpu_bench_writes_the_measurement_schema_and_metadata(cpu_run) -> None:
    from specsim.cost.measurements import read_measurements

    result, out = cpu_run
    df = read_measurements(out)  # schema check: ops, positive finite times
    assert set(df["op"]) == {"gemm", "attention", "memcpy"}
    gemm = df[(df["op"] == "gemm") & (df["layer_op"] != "peak")]
    assert set(gemm["tokens"]) == set(QUICK_TOKENS) and set(gemm["layer_op"]) == {"qkv", "o", "up", "down"}
    assert (df["std_ms"] >= 0).all() and (df["repeats"] >= 3).all() and (df["buffer_sets"] >= 1).all()
    att = df[df["op"] == "attention"]
    assert {1, 4} == set(att["q_per_seq"]) and (att["n_heads"] == 14).all() and (att["n_kv_heads"] == 2).all()
    meta = json.loads(out.with_suffix(".json").read_text())
    for key in ("device_name", "torch_version", "cuda_version", "dtype", "date", "driver_version"):
        assert key in meta
    assert meta["dtype"] == "bf16" and meta["rows"] == len(df) and not meta["interrupted"]
    assert meta["peak_matmul_tflops"] > 0 and meta["copy_bw_gb_per_s"] > 0
    assert result.meta.setup.backend == "cpu"


def test_cpu_bench_output_calibrates(cpu_run, tmp_path: Path, capsys) -> None:
    """Issue floor: the CPU runner's real output calibrates without error, against the base profile
    the run itself measured (peak matmul and copy bandwidth)."""
    from specsim.cost.hardware import load_hardware

    _, out = cpu_run
    prof = out.with_suffix(".profile.yaml")
    base = load_hardware(prof)
    assert base.name == "cpu" and base.peak("bf16") > 0
    fitted = tmp_path / "cpu-fitted.yaml"
    code, stdout, err = run(capsys, "calibrate", str(out), "--hardware", str(prof), "-o", str(fitted),
                            "--format", "csv")
    assert code == 0, err
    report = pd.read_csv(pd.io.common.StringIO(stdout))
    assert {"gemm", "attention", "memcpy"} <= {g.split("=")[1] for g in report["group"] if g.startswith("op=")}
    back = load_hardware(fitted)
    assert back.provenance["rows_fitted"] > 10 and back.efficiency.source.startswith("fitted by")
    assert (tmp_path / "cpu-fitted_predicted_vs_measured.png").stat().st_size > 10_000


def test_ctrl_c_keeps_what_was_measured(monkeypatch, tmp_path: Path, capsys) -> None:
    pytest.importorskip("torch")
    real_plan = bench.plan

    def interrupted_plan(*args, **kwargs):
        jobs = real_plan(*args, **kwargs)[:4]

        def stop() -> list[dict]:
            raise KeyboardInterrupt

        return [*jobs[:3], Job("Ctrl-C", stop), jobs[3]]

    monkeypatch.setattr(bench, "plan", interrupted_plan)
    out = tmp_path / "part.csv"
    code, _, err = run(capsys, "bench", "--device", "cpu", "--model", "qwen2.5-0.5b", "--quick",
                            "--ops", "gemm", "--no-progress", "-o", str(out))
    assert code == 130 and "interrupted" in err
    df = pd.read_csv(out)
    assert len(df) == 3  # the three jobs before Ctrl-C, none after
    assert json.loads(out.with_suffix(".json").read_text())["interrupted"] is True


def test_bad_bench_arguments_exit_2(tmp_path: Path, capsys) -> None:
    pytest.importorskip("torch")
    for args, msg in ((["--device", "tpu"], "--device must be cuda or cpu"),
                      (["--device", "cpu", "--dtype", "int4"], "--dtype must be one of"),
                      (["--device", "cpu", "--ops", "gemm,warp"], "--ops: unknown warp")):
        code, _, err = run(capsys, "bench", "--model", "qwen2.5-0.5b", "--quick", "-o", str(tmp_path / "x.csv"),
                           *args)
        assert code == 2 and msg in err, err
    assert not (tmp_path / "x.csv").exists()

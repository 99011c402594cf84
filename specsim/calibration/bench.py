"""The bundled microbenchmark runner: times the kernels the cost model predicts, with PyTorch.

What it measures (rows in the measurement schema, measurements.py; bench_jobs.py):
  * GEMMs of the model's linear layers under tensor parallelism (y = x @ W^T, as nn.Linear runs
    them), over a sweep of token counts 1..8192, dense below 512;
  * decode and verification attention, B sequences x q new tokens over a KV cache of L tokens, with
    PyTorch SDPA, and FlashAttention / FlashInfer when they are installed (CUDA);
  * device memory-copy bandwidth (bytes = read + written), a large matmul for the peak rate;
  * NCCL all-reduce when several GPUs are visible.

Timing (bench_backend.py): on CUDA, CUDA events around each call, after warm-up, with input buffers
rotated through more bytes than twice the L2 so that no repeat runs from cache, the median of the
repeats, clocks left as they are. On CPU, perf_counter around each call, the same rotation against
the last-level cache. Both backends share every other line of code, so the CPU path (which runs
everywhere, including CI) exercises the sweep, rotation, statistics and writing.

PyTorch is an optional extra (`pip install ".[bench]"`): it is imported inside functions only.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specsim.calibration.bench_backend import BenchRow, Job, make_backend
from specsim.calibration.bench_device import CpuDevice, DeviceMeta, device_meta
from specsim.calibration.bench_jobs import plan
from specsim.calibration.bench_profile import cpu_profile
from specsim.calibration.bench_shapes import DTYPES, OPS
from specsim.cost.model import ModelSpec
from specsim.errors import SpecsimError


@dataclass(frozen=True)
class BenchMeta:
    """The run's sidecar JSON: where it ran (`setup`), what it timed, and the summary rates."""

    setup: DeviceMeta
    model: str
    tp: int
    quick: bool
    ops: tuple[str, ...]
    interrupted: bool
    rows: int
    skipped: tuple[str, ...]  # shapes an optional attention kernel could not run, and why
    peak_matmul_tflops: float | None = None  # None: no peak measurement
    copy_bw_gb_per_s: float | None = None  # None: no memcpy measurement

    @property
    def device_name(self) -> str:
        return self.setup.device.device_name


@dataclass(frozen=True)
class BenchResult:
    rows: list[BenchRow]
    meta: BenchMeta

    @property
    def interrupted(self) -> bool:
        return self.meta.interrupted


def run_bench(device: str, model: ModelSpec, tp: int = 1, dtype: str = "bf16", quick: bool = False,
              ops: tuple[str, ...] = OPS, progress: bool = True) -> BenchResult:
    """Run the sweep. Ctrl-C stops it and keeps what was measured (result.interrupted)."""
    if dtype not in DTYPES:
        raise SpecsimError(f"--dtype must be one of {', '.join(DTYPES)} for the bench, got {dtype!r}")
    if tp < 1:
        raise SpecsimError(f"--tp must be >= 1, got {tp}")
    bad = [o for o in ops if o not in OPS]
    if bad:
        raise SpecsimError(f"--ops: unknown {', '.join(bad)} (known: {', '.join(OPS)})")
    be = make_backend(device, quick)
    setup = device_meta(be, dtype)
    skipped: list[str] = []
    jobs = plan(be, model, tp, dtype, quick, ops, skipped)
    rows: list[BenchRow] = []
    interrupted = False
    try:
        for _job, job_rows in _with_progress(jobs, progress):
            rows += [{"device": setup.device.profile, **r} for r in job_rows]
    except KeyboardInterrupt:
        interrupted = True
    meta = BenchMeta(setup, model.name, tp, quick, tuple(ops), interrupted, len(rows), tuple(skipped),
                     *_summaries(rows))
    return BenchResult(rows, meta)


def _with_progress(jobs: list[Job], progress: bool) -> Iterator[tuple[Job, list[BenchRow]]]:
    if not progress:
        for job in jobs:
            yield job, job.run()
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description:<40}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task("bench", total=len(jobs))
        for job in jobs:
            bar.update(task, description=job.label[:40])
            rows = job.run()
            bar.advance(task)
            yield job, rows


def _summaries(rows: list[BenchRow]) -> tuple[float | None, float | None]:
    """(peak matmul rate TFLOP/s, copy bandwidth GB/s) of the rows (what a base profile needs); None
    for one not measured."""
    df = pd.DataFrame(rows)
    if df.empty:
        return None, None
    peak_rate = copy_bw = None
    peak = df[(df["op"] == "gemm") & (df["layer_op"] == "peak")] if "layer_op" in df.columns else df.iloc[:0]
    if len(peak):
        r = peak.iloc[0]
        flops = 2 * r["tokens"] * r["d_in"] * r["d_out"]
        peak_rate = float(flops / (r["time_ms"] * 1e-3) / 1e12)
    copies = df[df["op"] == "memcpy"]
    if len(copies):
        copy_bw = float((copies["bytes"] / (copies["time_ms"] * 1e-3)).max() / 1e9)
    return peak_rate, copy_bw


def meta_json(meta: BenchMeta) -> str:
    """The sidecar JSON: the setup's fields, the device's, then the run's (rates only when measured)."""
    data = dataclasses.asdict(meta)
    flat = data.pop("setup")
    flat.update(flat.pop("device"))
    flat.update(data)
    for rate in ("peak_matmul_tflops", "copy_bw_gb_per_s"):
        if flat[rate] is None:
            del flat[rate]
    return json.dumps(flat, indent=2, default=_json_default) + "\n"


def write_bench(result: BenchResult, output: str | Path, dtype: str) -> list[Path]:
    """The CSV, its sidecar JSON of metadata and, for a CPU run, a base profile YAML; each written
    atomically. Returns the paths written."""
    import yaml

    from specsim.calibration.writing import write_atomic
    from specsim.cost.measurements import COLUMNS

    output = Path(output)
    if not result.rows:
        raise SpecsimError("nothing was measured: no file written")
    df = pd.DataFrame(result.rows)
    cols = [c for c in COLUMNS if c in df.columns] + [c for c in df.columns if c not in COLUMNS]
    df = df[cols]
    files: list[tuple[Path, str]] = [(output, df.to_csv(index=False)),
                                     (output.with_suffix(".json"), meta_json(result.meta))]
    meta = result.meta
    if isinstance(meta.setup.device, CpuDevice) and meta.peak_matmul_tflops and meta.copy_bw_gb_per_s:
        profile = cpu_profile(meta.setup.device, meta.setup.date, meta.peak_matmul_tflops, meta.copy_bw_gb_per_s,
                              dtype)
        files.append((output.with_suffix(".profile.yaml"), yaml.safe_dump(dataclasses.asdict(profile),
                                                                          sort_keys=False)))
    for path, text in files:  # every text is built before the first file is written
        write_atomic(path, text)
    return [p for p, _ in files]


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    return str(o)

"""Speed of the cost model (not part of the test run): python benchmarks/bench_costmodel.py

Times one vectorised forward_time_s call over a grid of batch x tokens-per-sequence x context,
and predict over every Vidur linear-layer row when ../shared/reference/vidur is present.

    python benchmarks/bench_costmodel.py [--json PATH]   # PATH: the results as JSON (tools/readme_figures.py)
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from specsim.cost.forward import forward_time_s
from specsim.cost.hardware import load_hardware
from specsim.cost.model import load_model


def best_of(fn, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="also write the results to this JSON file")
    args = ap.parse_args()
    out: dict[str, Any] = {"roofline": {}}
    hw = load_hardware("h100-sxm")
    for name in ("llama-3.1-70b", "mixtral-8x7b", "deepseek-v3"):
        model = load_model(name)
        b = np.arange(1, 257, 4)[:, None, None]  # 64 batch sizes
        q = np.arange(1, 18)[None, :, None]  # k = 0..16
        ctx = np.geomspace(512, 131072, 16).round()[None, None, :]  # 16 contexts
        n = b.size * q.size * ctx.size
        t = best_of(lambda model=model, b=b, q=q, ctx=ctx: forward_time_s(hw, model, b, q, ctx, tp=8))
        print(f"forward_time_s {name:14s} {n:7d} passes in {t * 1e3:7.1f} ms ({n / t / 1e6:.2f} M passes/s)")
        out["roofline"][name] = {"passes": n, "best_s": t, "passes_per_s": n / t}
    import importlib.util

    if importlib.util.find_spec("aiconfigurator_core") is not None:  # the measured-table backend (.[tables])
        table = hw.with_cost_model("table", framework="vllm")
        model = load_model("llama-3.1-70b")
        t0 = time.perf_counter()
        forward_time_s(table, model, 1, 1, 1024, tp=8)  # builds the ratio grids once per process
        build = time.perf_counter() - t0
        b, q, ctx = np.arange(1, 257, 4)[:, None, None], np.arange(1, 18)[None, :, None], np.geomspace(
            512, 131072, 16).round()[None, None, :]
        t = best_of(lambda: forward_time_s(table, model, b, q, ctx, tp=8))
        n = b.size * q.size * ctx.size
        print(f"table backend: grids built in {build:.1f} s; forward_time_s llama-3.1-70b {n} "
              f"passes in {t * 1e3:.1f} ms")
        out["table"] = {"model": "llama-3.1-70b", "build_s": build, "passes": n, "best_s": t, "passes_per_s": n / t}
    vidur = Path(__file__).resolve().parents[2] / "shared" / "reference" / "vidur"
    if vidur.is_dir():
        from specsim.calibration.vidur import import_vidur
        from specsim.cost.measurements import predict_table, resolver

        df = import_vidur(vidur)
        gemm = df[df["op"] == "gemm"]
        t = best_of(lambda: predict_table(gemm, resolver(None)), 3)
        print(f"predict {len(gemm)} vidur GEMM rows in {t * 1e3:.0f} ms")
        out["vidur_predict"] = {"rows": len(gemm), "best_s": t}
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

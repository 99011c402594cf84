"""Speed of the planner (not part of the test run): python benchmarks/bench_plan.py

1. The issue's sweep: 8 drafts x k 0..16 x 64 batch sizes x 16 context lengths x 20 alpha values
   (about 2.8 million configurations) through `sweep_arrays`, on Llama-3.1-70B / 8x H100.
2. `specsim plan` on every bundled scenario, wall time with interpreter start (subprocess).

    python benchmarks/bench_plan.py [--only sweep,plan] [--json PATH]   # PATH: the results as JSON (README)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from specsim.cost.hardware import load_hardware
from specsim.cost.model import load_model
from specsim.drafts.build import make_draft
from specsim.plan.sweep import sweep_arrays
from specsim.step.evaluate import Target

ROOT = Path(__file__).resolve().parents[1]


def sweep_benchmark() -> dict[str, Any]:
    target = load_model("llama-3.1-70b")
    t = Target(load_hardware("h100-sxm"), target, tp=8)
    drafts = [make_draft(spec, target) for spec in (
        "eagle", "eagle2", "eagle3", "medusa", "ngram", "lookahead",
        {"method": "draft_model", "model": "llama-3.2-1b", "draft_tp": 1},
        {"method": "draft_model", "model": "llama-3.2-3b", "draft_tp": 1})]
    batch = np.unique(np.round(np.geomspace(1, 512, 64)))
    batch = np.linspace(1, 512, 64).round() if len(batch) < 64 else batch
    context = np.geomspace(512, 131072, 16).round()
    alphas = np.linspace(0.05, 0.99, 20)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        n = 0
        for d in drafts:
            out = sweep_arrays(t, d, 16, batch, context, alphas)
            n += int(np.broadcast(*out.values()).size)
        best = min(best, time.perf_counter() - t0)
    print(f"sweep: {n:,} configurations ({len(drafts)} drafts x k 0..16 x {len(batch)} batches x "
          f"{len(context)} contexts x {len(alphas)} alphas) in {best:.2f} s (best of 3)")
    return {"configurations": n, "drafts": len(drafts), "batches": len(batch), "contexts": len(context),
            "alphas": len(alphas), "best_s": best}


def plan_benchmark() -> dict[str, Any]:
    out: dict[str, float] = {}
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "specsim.cli", "plan", str(path), "--format", "json"], check=True,
                           capture_output=True)
            times.append(time.perf_counter() - t0)
        print(f"specsim plan {path.name:32s} {min(times):.2f} s wall (best of 3, interpreter start included)")
        out[path.name] = min(times)
    return {"plan_best_s": out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="sweep,plan", help="what to run: sweep,plan")
    ap.add_argument("--json", type=Path, help="also write the results to this JSON file")
    args = ap.parse_args()
    parts = {"sweep": sweep_benchmark, "plan": plan_benchmark}
    out = {name: parts[name]() for name in args.only.split(",") if name}
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

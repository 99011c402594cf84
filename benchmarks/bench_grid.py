"""Speed of `specsim evaluate --grid`: 10,000 rows in one call (the issue's bound: < 2 s).

    python benchmarks/bench_grid.py

Rows mix 4 setups (two engines, two drafts) over random k, batch and context, as a notebook or
`validate --published` asks them. Best of 3, wall time of `plan.grid.evaluate_grid` (loads included).
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from specsim.plan.grid import evaluate_grid


def main() -> None:
    rng = np.random.default_rng(0)
    n = 10_000
    frame = pd.DataFrame({
        "hardware": "h100-sxm", "model": rng.choice(["llama-3.1-8b", "llama-3.1-70b"], n),
        "tp": 1, "engine": rng.choice(["vllm", "sglang"], n), "draft": rng.choice(["eagle3", "ngram"], n),
        "k": rng.integers(0, 8, n), "batch": rng.integers(1, 256, n), "context": rng.integers(128, 16384, n),
    })
    frame.loc[frame["model"] == "llama-3.1-70b", "tp"] = 8
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        out = evaluate_grid(frame)
        best = min(best, time.perf_counter() - t0)
    print(f"evaluate_grid: {n:,} rows in {best:.3f} s (best of 3); {int((out['error'] == '').sum()):,} evaluated, "
          f"{int((out['error'] != '').sum()):,} with a reason (e.g. does not fit)")


if __name__ == "__main__":
    main()

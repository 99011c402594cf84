"""Speed of `specsim evaluate --grid`: 10,000 rows in one call (the issue's bound: < 2 s).

    python benchmarks/bench_grid.py [--json PATH]     # PATH: the results as JSON (tools/readme_figures.py)

Rows mix 4 setups (two engines, two drafts) over random k, batch and context, as a notebook or
`validate --published` asks them; then 10,000 rows of DeepSeek-V3 with MTP over four parallel layouts (tp 8,
tp 8 + ep 8, dp 8 + ep 8, tp 4 + pp 2). Best of 3, wall time of `advise.grid.evaluate_grid` (loads included).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specsim.advise.grid import evaluate_grid


def _best(frame: pd.DataFrame, label: str) -> dict[str, Any]:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        out = evaluate_grid(frame)
        best = min(best, time.perf_counter() - t0)
    print(f"{label}: {len(frame):,} rows in {best:.3f} s (best of 3); {int((out['error'] == '').sum()):,} evaluated, "
          f"{int((out['error'] != '').sum()):,} with a reason (e.g. does not fit)")
    return {"rows": len(frame), "best_s": best, "evaluated": int((out["error"] == "").sum())}


def layouts(n: int = 10_000) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    lay = rng.integers(0, 4, n)
    return pd.DataFrame({
        "hardware": "h200", "model": "deepseek-v3", "draft": "mtp", "weight_dtype": "fp8_block",
        "tp": np.choose(lay, [8, 8, 1, 4]), "ep": np.choose(lay, [1, 8, 8, 1]), "dp": np.choose(lay, [1, 1, 8, 1]),
        "pp": np.choose(lay, [1, 1, 1, 2]), "k": rng.integers(0, 5, n), "batch": rng.integers(1, 256, n),
        "context": rng.integers(128, 16384, n),
    })


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="also write the results to this JSON file")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    n = 10_000
    frame = pd.DataFrame({
        "hardware": "h100-sxm", "model": rng.choice(["llama-3.1-8b", "llama-3.1-70b"], n),
        "tp": 1, "engine": rng.choice(["vllm", "sglang"], n), "draft": rng.choice(["eagle3", "ngram"], n),
        "k": rng.integers(0, 8, n), "batch": rng.integers(1, 256, n), "context": rng.integers(128, 16384, n),
    })
    frame.loc[frame["model"] == "llama-3.1-70b", "tp"] = 8
    out = {"mixed": _best(frame, "evaluate_grid"), "layouts": _best(layouts(), "evaluate_grid, MoE layouts")}
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

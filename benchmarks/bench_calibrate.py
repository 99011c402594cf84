"""Speed of calibration (not part of the test run): python benchmarks/bench_calibrate.py

Times the GEMM model over every Vidur linear-layer row, one fit on Llama-2-7B's H100 rows, and the
all-reduce fit, when ../shared/reference/vidur is present; otherwise on synthetic rows.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from specsim.calibration.allreduce import fit_allreduce
from specsim.calibration.fit import calibrate
from specsim.cost import roofline as rl
from specsim.cost.hardware import load_hardware
from specsim.cost.measurements import RowSet, check_measurements

VIDUR = Path(__file__).resolve().parents[1].parent / "shared" / "reference" / "vidur"


def timed(label: str, fn) -> object:
    t0 = time.perf_counter()
    out = fn()
    print(f"{label:<55s} {time.perf_counter() - t0:8.3f} s")
    return out


def main() -> None:
    hw = load_hardware("h100-sxm")
    m = np.arange(1, 8193, dtype=float)
    timed(f"gemm_time_s over 8192 token counts ({len(rl._TM)} configurations)",
          lambda: rl.gemm_time_s(m, 28672, 8192, hw))
    if (VIDUR / "compute").is_dir():
        from specsim.calibration.vidur import import_vidur

        df = timed("import vidur", lambda: import_vidur(VIDUR))
    else:
        print(f"{VIDUR} absent: synthetic rows")
        rows = [{"op": "gemm", "device": "h100-sxm", "dtype": "bf16", "tokens": t, "d_in": k, "d_out": n,
                 "model": "Llama-2-7b-hf" if n == 4096 else "other"}
                for n, k in ((4096, 4096), (12288, 4096), (28672, 8192)) for t in range(1, 4097, 16)]
        df = pd.DataFrame(rows)
        df["time_ms"] = rl.gemm_time_s(df["tokens"], df["d_out"], df["d_in"], hw)[0] * 1e3
        df = check_measurements(df, "synthetic")
    gemm = df[(df["op"] == "gemm") & (df["device"] == "h100-sxm")]
    rows = RowSet(gemm)
    timed(f"predict {len(gemm):,} H100 gemm rows", lambda: rows.predict_ms(hw))
    result = timed("calibrate on Llama-2-7B, hold out the rest",
                   lambda: calibrate(gemm, hw, holdout="model!=Llama-2-7b-hf"))
    print(result.report[result.report["group"] == "all"].to_string(index=False))
    if (df["op"] == "allreduce").any():
        ar = df[(df["op"] == "allreduce") & (df["device"] == "h100-sxm")]
        timed(f"all-reduce fit, {len(ar):,} rows", lambda: fit_allreduce(ar, hw))
    import importlib.util

    if importlib.util.find_spec("aiconfigurator_core") is not None:  # NVIDIA's tables (.[tables])
        from specsim.calibration import tables

        rows_t = timed("load NVIDIA's H100 vLLM tables (aiconfigurator-core)", lambda: tables.load_rows("h100-sxm"))
        timed("score the H100 profile on them", lambda: tables.score(hw, rows_t))
        timed("calibrate-tables stages gemm..allreduce (1 start)", lambda: tables.fit_to_tables(hw, rows_t))


if __name__ == "__main__":
    main()

"""Speed of `specsim report` (not part of the test run): python benchmarks/bench_report.py

Wall time of `specsim report SCENARIO -o DIR` for every bundled scenario, interpreter start included
(a subprocess, as a person runs it), best of 3; the issue's floor is 4 s each (FLOOR_S) on the 2-core CI machine.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLOOR_S = 4.0  # issue #13: a report under 4 s per bundled scenario on 2 cores


def report_benchmark(repeats: int = 3) -> bool:
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted((ROOT / "scenarios").glob("*.yaml")):
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-m", "specsim.cli", "report", str(path), "-o",
                                str(Path(tmp) / path.stem)], check=True, capture_output=True)
                times.append(time.perf_counter() - t0)
            best = min(times)
            ok = ok and best < FLOOR_S
            print(f"specsim report {path.name:32s} {best:5.2f} s wall (best of {repeats}; worst {max(times):.2f} s)"
                  f"{'' if best < FLOOR_S else '  OVER THE 4 s FLOOR'}")
    return ok


if __name__ == "__main__":
    sys.exit(0 if report_benchmark() else 1)

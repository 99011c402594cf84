"""Wall time of the README's test run (`python -m pytest`), as a person runs it after installing (not part of the
test run itself): python benchmarks/bench_tests.py [--json PATH] [-- PYTEST ARGS]

`--json PATH` also writes the wall time, the exit status and pytest's summary line as JSON (tools/readme_figures.py
reads it for the README's "The test run takes ..." sentence).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="also write the results to this JSON file")
    ap.add_argument("pytest_args", nargs="*", help="passed to pytest (default: none, as the README runs it)")
    args = ap.parse_args()
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args.pytest_args]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    summary = lines[-1] if lines else ""
    failed = [line.split(" - ")[0].removeprefix("FAILED ") for line in lines if line.startswith("FAILED ")]
    print(f"python -m pytest: {wall / 60:.1f} min on {os.cpu_count()} cores, exit {proc.returncode}: {summary}")
    if args.json:
        args.json.write_text(json.dumps({"wall_s": wall, "returncode": proc.returncode, "summary": summary,
                                         "failed": failed, "cores": os.cpu_count()}, indent=1))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())

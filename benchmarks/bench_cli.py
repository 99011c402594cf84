"""Speed of the commands a person runs first (not part of the test run): python benchmarks/bench_cli.py

Wall time of each command in a fresh interpreter (a subprocess, as a person runs it), best of 3, against
issue #17's floors on the 2-core CI machine: `--version` and `hardware list` < 0.25 s, `plan` of each
analytic bundled scenario < 0.8 s, `report` of each analytic scenario < 2.5 s and of the traffic scenario
< 4 s, `validate --published` < 3 s; `fit-runs` of the bundled real runs < 10 s.

The fitted priors catalogue is cached on disk by specsim (~/.cache/specsim, keyed by the data and the
fitting code) the first time any command needs it. `--cold` gives each run an empty cache folder, so
every run pays that fit (~0.6 s) as a machine's very first run does; the default keeps the cache that
the first run writes, as every later run on a machine finds it.

    python benchmarks/bench_cli.py [--cold] [--only plan,report,...] [--json PATH]

`--json PATH` also writes every case's best time as JSON (tools/readme_figures.py reads it for the README's
Speed table).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
TRAFFIC = "chat-traffic-llama8b-h100"


def _cases(out: Path) -> list[tuple[str, str, list[str], float]]:
    """(kind, label, argv, floor in s)."""
    cases: list[tuple[str, str, list[str], float]] = [
        ("version", "--version", ["--version"], 0.25),
        ("list", "hardware list", ["hardware", "list"], 0.25),
        ("list", "models list", ["models", "list"], 0.25),
        ("list", "engines list", ["engines", "list"], 0.25),
    ]
    for path in SCENARIOS:
        if path.stem != TRAFFIC:
            cases.append(("plan", f"plan {path.name}", ["plan", str(path)], 0.8))
    for path in SCENARIOS:
        floor = 4.0 if path.stem == TRAFFIC else 2.5
        cases.append(("report", f"report {path.name}", ["report", str(path), "-o", str(out / path.stem)], floor))
    cases.append(("validate", "validate --published", ["validate", "--published"], 3.0))
    # issue "Your deployment in": the bundled real runs fitted (no floor in the issue: 10 s, a person waits on it)
    runs = ROOT / "examples" / "runs" / "dsv4-flash-b300"
    cases.append(("fit", "fit-runs examples/runs/dsv4-flash-b300 (4 runs)", [
        "fit-runs", "-H", "b300", "-m", "deepseek-ai/DeepSeek-V4-Flash", "--tp", "8", "--kv-dtype", "fp8", "-d", "mtp",
        "-k", "1", *(x for f in ("off_qps1", "off_qps8") for x in ("--off", str(runs / f"{f}.json"))),
        *(x for f in ("mtp1_qps1", "mtp1_qps8") for x in ("--on", str(runs / f"{f}.json"))),
        "-o", str(out / "deployment.yaml")], 10.0))
    return cases


def _time(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "specsim.cli", *argv], check=True, capture_output=True, env=env)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cold", action="store_true", help="an empty specsim cache for every run")
    ap.add_argument("--only", default="", help="kinds to run: version,list,plan,report,validate,fit")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path, help="also write the results to this JSON file")
    args = ap.parse_args()
    kinds = {k for k in args.only.split(",") if k}
    ok = True
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind, label, argv, floor in _cases(Path(tmp)):
            if kinds and kind not in kinds:
                continue
            times = []
            for _ in range(args.repeats):
                env = dict(os.environ)
                if args.cold:
                    env["XDG_CACHE_HOME"] = tempfile.mkdtemp(dir=tmp)
                times.append(_time(argv, env))
            best = min(times)
            ok = ok and best < floor
            rows.append({"kind": kind, "label": label, "best_s": best, "times_s": times, "floor_s": floor})
            print(f"{label:44s} {best:5.2f} s (best of {args.repeats}; floor {floor:g} s)"
                  f"{'' if best < floor else '  OVER'}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"cold": args.cold, "repeats": args.repeats, "cases": rows}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

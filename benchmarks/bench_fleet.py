"""Issue 33's floor: a fleet search of 10,000 configurations x a traffic mix, locally and on a Dask local cluster,
with the same answer (not part of the test run; needs the test extra's dask[distributed] for the cluster half).

    python benchmarks/bench_fleet.py [--workers 2] [--pd auto]

The mix is scenarios/chat-traffic-llama8b-h100.yaml's (chat 70% / code 30%, each class's acceptance its task's
prior) at its 80 requests/s target within 20 ms/token: 25 GPU types x tp 1,2,4,8 = 100 placements, each plain
decoding and 9 drafts x k 1-11 = 100 configurations. Prints each run's time, configurations per second, tasks and
whether the two answers (the best configuration and the whole ranked table) are equal. With --pd (prefill:decode
ratios, or auto: `specsim fleet --pd auto`'s six) each placement is also priced in those pools beside aggregated:
--pd auto makes 100 x 7 placements, 70,000 configurations.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from specsim.cost.hardware import available
from specsim.drafts.build import make_draft
from specsim.plan.fleet_search import AUTO_PD, FleetAnswer, Space, question, search
from specsim.scenario.kv_cache import parse_pd
from specsim.scenario.scenario import load_scenario

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "chat-traffic-llama8b-h100.yaml"
DRAFTS = ("eagle3", "ngram", "medusa", "eagle", "eagle2", "suffix", "p_eagle", "dflash", "dspark")
KS = tuple(range(1, 12))
TP = (1, 2, 4, 8)


def _line(name: str, ans: FleetAnswer) -> str:
    b = ans.best
    best = "none" if b is None else f"{b.gpus:g}x {b.hardware} tp {b.tp} {b.layout} {b.draft} k {b.k}"
    return (f"{name:<22} {ans.configurations:,} configurations in {ans.seconds:6.1f} s = {ans.per_second:6.0f}/s "
            f"({ans.tasks} tasks); best {best}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2, help="local processes and Dask workers")
    ap.add_argument("--pd", default=None, help="prefill:decode ratios searched beside aggregated (auto: "
                    f"{AUTO_PD}; default: aggregated only)")
    args = ap.parse_args()
    pd = () if args.pd is None else tuple(parse_pd(AUTO_PD if args.pd == "auto" else args.pd))
    s = load_scenario(SCENARIO)
    hardware = tuple(available())
    q = question(s, [make_draft(d, s.model) for d in DRAFTS], KS, prices=dict.fromkeys(hardware, 2.5))
    space = Space((("hardware", hardware), ("tp", TP), ("ep", (1,)), ("pd", (None, *pd))))
    start = time.perf_counter()
    local = search(q, space, "local", n_jobs=args.workers)
    print(_line(f"local ({args.workers} processes)", local), f"[wall {time.perf_counter() - start:.1f} s]")
    try:
        from distributed import LocalCluster
    except ImportError:
        print("dask cluster: skipped (pip install 'dask[distributed]', the test extra)")
        return
    start = time.perf_counter()
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        up = time.perf_counter() - start
        remote = search(q, space, "dask", c.scheduler_address)
    print(_line(f"dask ({args.workers} workers)", remote), f"[cluster up in {up:.1f} s]")
    print(f"same best: {remote.best == local.best}; same table: {remote.rows == local.rows}")


if __name__ == "__main__":
    main()

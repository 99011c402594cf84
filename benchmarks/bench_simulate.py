"""Speed and floors of the serving simulation (not part of the test run): python benchmarks/bench_simulate.py

1. 100,000 requests (Poisson chat traffic, lognormal prompts and outputs, a 60/40 chat/code acceptance mix)
   through the event loop, speculation off and at k = 3; wall time per run (floor: < 20 s); then the same
   on the real planner (`simulate.planner.PlannerCost`: Llama-3.1-8B on an H100 with EAGLE-3, vLLM), the
   step table's build included.
2. The floors the tests check, at larger sizes: step times at constant concurrency against the real planner
   (`plan.evaluate.step_arrays` through the adapter, both drafts of llama8b-1b-draft-h100) and against a
   roofline-like decode_s with a kink, the M/D/1 queueing delay against Pollaczek-Khinchine, Little's law.
3. A small sweep (4 cases x 25,000 requests) with joblib, 1 and 2 processes.
4. Closed loop as serving benchmarks run it (issue 21's floor: 64 concurrency points x 2 configurations x 1,000
   requests in under 10 s on 2 cores): Llama-3.1-8B on an H100 with EAGLE-3 k = 3, vLLM, 1024 / 1024 tokens at
   range ratio 0.8, concurrency 1..64, the frontier read (the step table's build included); then Little's law
   and the concurrency-1 TPOT against the planner's step time per token.

    python benchmarks/bench_simulate.py [--only closed,speed,planner,planner_floor,floors,sweep] [--json PATH]

`--json PATH` also writes what each part measured as JSON (tools/readme_figures.py reads it for the README).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from specsim.scenario.serving import EngineConfig
from specsim.scenario.traffic import Fixed, Lognormal, Poisson, Requests, Traffic, generate_requests
from specsim.scenario.workload import AcceptanceMix, WorkloadClass
from specsim.simulate.cost import AnalyticCost
from specsim.simulate.engine import simulate
from specsim.simulate.metrics import summarize
from specsim.simulate.sweep import grid, sweep
from specsim.step.policy import Policy

# Roughly Llama-3.1-70B on 8 GPUs: 12 ms a step, 20 us per verified token, KV reads per context token.
COST = AnalyticCost(step_s=0.012, per_token_s=2e-5, per_token_context_s=2e-8, prefill_fixed_s=0.005,
                    prefill_per_token_s=6e-5)
MIX = AcceptanceMix((WorkloadClass("chat", 0.6, (0.8, 0.75, 0.7, 0.65)), WorkloadClass("code", 0.4, (0.9, 0.88))))
TRAFFIC = Traffic(Poisson(8.0), Lognormal(1000, 0.8, max_tokens=8192), Lognormal(200, 0.8, max_tokens=2048),
                  num_requests=100_000)


class Roofline:
    """max(compute, memory) + overheads: a cost with a kink, as the planner's roofline has."""

    def decode_s(self, batch: np.ndarray, mean_context: np.ndarray, k: np.ndarray) -> np.ndarray:
        b, c, kk = np.asarray(batch, float), np.asarray(mean_context, float), np.asarray(k, float)
        return 2e-3 + np.maximum(2e-4 * b * (kk + 1), 8e-3 + 3e-8 * b * c) + 1.5e-3 * kk

    def prefill_s(self, tokens: np.ndarray, mean_context: np.ndarray) -> np.ndarray:
        return np.zeros(np.broadcast(np.asarray(tokens), np.asarray(mean_context)).shape)


def speed() -> dict[str, Any]:
    req = generate_requests(TRAFFIC, seed=0)
    out: dict[str, Any] = {"requests": req.n}
    for policy in (Policy.off(), Policy.static(3)):
        eng = EngineConfig(256, 8192, 600_000, policy)
        t0 = time.perf_counter()
        res = simulate(req, eng, COST, MIX, seed=0)
        wall = time.perf_counter() - t0
        m = summarize(res, bins=200)
        print(f"speed: {req.n:,} requests, policy {policy.label:>4}: {wall:5.2f} s "
              f"({res.steps.n:,} iterations, {wall / res.steps.n * 1e6:.1f} us each; mean batch "
              f"{m.mean_decode_batch:.0f}, TPOT p50 {m.tpot_s.p50 * 1e3:.1f} ms, preemptions {m.preemptions})")
        out[policy.label] = wall
    return out


def planner_speed() -> dict[str, Any]:
    from specsim.advise.planner import PlannerCost, chain
    from specsim.scenario.scenario import load_scenario
    from specsim.step.evaluate import Target

    s = load_scenario(Path(__file__).resolve().parents[1] / "scenarios" / "llama8b-1b-draft-h100.yaml")
    t = Target(s.hardware, s.model, s.tp, s.weight_dtype, s.kv_dtype, s.memory_utilization, s.engine)
    d = chain(next(x for x in s.drafts if x.method == "eagle3"))
    req = generate_requests(TRAFFIC, seed=0)
    out: dict[str, Any] = {"requests": req.n, "model": t.model.name, "hardware": t.hardware.name, "draft": d.label}
    for policy in (Policy.off(), Policy.static(3)):
        eng = EngineConfig(256, 8192, 400_000, policy)
        t0 = time.perf_counter()
        res = simulate(req, eng, PlannerCost(t, d), MIX, seed=0)
        wall = time.perf_counter() - t0
        m = summarize(res, bins=200)
        print(f"speed, real planner ({t.model.name} on {t.hardware.name}, {d.label}): {req.n:,} requests, policy "
              f"{policy.label:>4}: {wall:5.2f} s with the step table's build ({res.steps.n:,} iterations; mean batch "
              f"{m.mean_decode_batch:.0f}, TPOT p50 {m.tpot_s.p50 * 1e3:.1f} ms, preemptions {m.preemptions})")
        out[policy.label] = wall
    return out


def planner_floor() -> dict[str, Any]:
    from specsim.advise.planner import PlannerCost, chain
    from specsim.scenario.scenario import load_scenario
    from specsim.step.evaluate import Target, step_arrays

    s = load_scenario(Path(__file__).resolve().parents[1] / "scenarios" / "llama8b-1b-draft-h100.yaml")
    t = Target(s.hardware, s.model, s.tp, s.weight_dtype, s.kv_dtype, s.memory_utilization, s.engine)
    worst, steps = 0.0, 0
    for d in (chain(x) for x in s.drafts):
        cost = PlannerCost(t, d)
        for k in (0, 2, 4):
            for n in (1, 16, 64, 256):
                for prompt in (500, 3000, 20_000):
                    res = simulate(Requests.at_once(n, prompt, 801), EngineConfig(256, 10**7, 10**8,
                                                                                 Policy.static(k)),
                                   cost, AcceptanceMix.constant(1.0))
                    st = res.steps
                    idx = np.flatnonzero((st.decode_batch == n) & (st.prefill_tokens == 0))
                    ctx = prompt + np.arange(len(idx)) * (k + 1.0)
                    ref = step_arrays(t, d, k, float(n), ctx, 1.0).step_time_s
                    worst = max(worst, float(np.abs(st.duration_s[idx] / ref - 1).max()))
                    steps += len(idx)
    print(f"floor: constant concurrency against the real planner (step_arrays via PlannerCost; {t.model.name} on "
          f"{t.hardware.name}, vLLM; drafts {', '.join(x.label for x in s.drafts)}; batch 1-256, k 0/2/4, context "
          f"500-20,800; {steps:,} decode steps): max error {worst:.2e} (floor 2%)")
    return {"steps": steps, "max_rel_error": worst}


def floors() -> dict[str, Any]:
    cost = Roofline()
    worst = 0.0
    for k in (0, 2, 4):
        for n in (1, 16, 64, 256):
            for prompt in (500, 3000, 20_000):
                res = simulate(Requests.at_once(n, prompt, 801),
                               EngineConfig(256, 10**7, 10**8, Policy.static(k)), cost, AcceptanceMix.constant(1.0))
                st = res.steps
                idx = np.flatnonzero(st.decode_batch == n)
                ctx = prompt + np.arange(len(idx)) * (k + 1.0)
                ref = cost.decode_s(np.full(len(idx), n), ctx, np.full(len(idx), k))
                worst = max(worst, float(np.abs(st.duration_s[idx] / ref - 1).max()))
    print(f"floor: constant concurrency (batch 1-256, k 0/2/4, context 500-20,800, across the roofline kink): "
          f"step time vs decode_s, max error {worst:.3%} (floor 2%)")
    step = 0.05
    out: dict[str, Any] = {"roofline_max_rel_error": worst, "md1": {}}
    for rho in (0.5, 0.7, 0.8):
        errs, little = [], []
        for seed in range(5):
            req = generate_requests(Traffic(Poisson(rho / (2 * step)), Fixed(1), Fixed(3), num_requests=200_000),
                                    seed)
            m = summarize(simulate(req, EngineConfig(1, 64, 10**6), AnalyticCost(step_s=step), seed=seed),
                          bins=None)
            wq = rho * 2 * step / (2 * (1 - rho))
            errs.append(m.queue_s.mean / wq - 1)
            little.append(m.mean_in_system / (m.requests_per_s * m.e2e_s.mean) - 1)
        print(f"floor: M/D/1 rho={rho}: mean queueing delay vs Pollaczek-Khinchine, 5 seeds x 200k requests: "
              f"errors {', '.join(f'{e:+.2%}' for e in errs)} (floor 5%); Little's law max error "
              f"{max(abs(x) for x in little):.1e} (floor 2%)")
        out["md1"][str(rho)] = {"pk_errors": errs, "little_max_error": max(abs(x) for x in little)}
    return out


def sweep_speed() -> dict[str, Any]:
    tr = Traffic(Poisson(8.0), Lognormal(1000, 0.8, max_tokens=8192), Lognormal(200, 0.8, max_tokens=2048),
                 num_requests=25_000)
    cases = grid(tr, EngineConfig(256, 8192, 600_000), MIX, rates_rps=[4.0, 8.0],
                 policies=[Policy.off(), Policy.static(3)])
    out: dict[str, Any] = {}
    for jobs in (1, 2):
        t0 = time.perf_counter()
        frame = sweep(cases, COST, n_jobs=jobs)
        out[f"jobs_{jobs}"] = time.perf_counter() - t0
        print(f"sweep: {len(frame)} cases x 25,000 requests, n_jobs={jobs}: {out[f'jobs_{jobs}']:.2f} s")
    return out


def closed_loop_speed() -> dict[str, Any]:
    from specsim.advise.benchmark import BenchmarkFlags, benchmark_scenario, frontier
    from specsim.advise.simulation import make_setup

    flags = BenchmarkFlags("h100-sxm", "llama-3.1-8b", ("eagle3",), k=3, range_ratio=0.8, concurrency=(1,))
    out: dict[str, Any] = {}
    for jobs in (1, 2):
        t0 = time.perf_counter()
        setup = make_setup(benchmark_scenario(flags), policy=Policy.static(3))
        f = frontier(setup, None, list(range(1, 65)), None, None, "vllm", n_jobs=jobs, num_prompts=1000)
        wall = time.perf_counter() - t0
        rows = f.rows
        little = rows["request_per_s"] * rows["e2e_mean_ms"] / 1e3 / rows["concurrency"]
        print(f"closed loop: {len(rows)} simulations (64 concurrencies x 2 configurations x 1,000 requests), "
              f"{jobs} process(es): {wall:.2f} s (floor < 10 s); throughput x mean latency / concurrency "
              f"{little.min():.4f}-{little.max():.4f}; crossover {f.crossovers}")
        out[f"jobs_{jobs}"] = {"wall_s": wall, "simulations": len(rows), "little_min": float(little.min()),
                               "little_max": float(little.max())}
    return out


PARTS = {"closed": closed_loop_speed, "speed": speed, "planner": planner_speed, "planner_floor": planner_floor,
         "floors": floors, "sweep": sweep_speed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(PARTS), help=f"parts to run: {','.join(PARTS)}")
    ap.add_argument("--json", type=Path, help="also write the results to this JSON file")
    args = ap.parse_args()
    out = {name: PARTS[name]() for name in args.only.split(",") if name}
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

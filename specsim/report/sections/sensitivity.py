"""Sensitivity: the plan re-made with acceptance scaled down and each input moved down and up."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

import numpy as np

from specsim.acceptance.chain import AcceptanceProfile
from specsim.errors import SpecsimError
from specsim.forking import fork_context
from specsim.plan.candidates import evaluate_draft
from specsim.plan.decide import bucket_choices, bucket_points
from specsim.plan.optimize import plan as make_plan
from specsim.plan.result import Plan
from specsim.plan.summary import plan_dict
from specsim.report.context import Ctx, Section, md_table
from specsim.report.figures import sensitivity as fg
from specsim.scenario.scenario import ArrivalLoad, Bucket, Scenario
from specsim.step.policy import Config

ACCEPTANCE_SCALES = (1.0, 0.9, 0.8)


def scale_profile(p: AcceptanceProfile, factor: float) -> AcceptanceProfile:
    """Acceptance rates (and tail) multiplied by factor, clipped to [0, 1]."""
    rates = tuple(float(np.clip(r * factor, 0.0, 1.0)) for r in p.rates)
    tail = None if p.tail is None else float(np.clip(p.tail * factor, 0.0, 1.0))
    return AcceptanceProfile(rates, tail, f"{p.source} (x{factor:g})")


def with_acceptance(s: Scenario, factor: float) -> Scenario:
    return dataclasses.replace(s, drafts=tuple(dataclasses.replace(d, acceptance=scale_profile(d.acceptance, factor))
                                               for d in s.drafts))


def _with_efficiency(s: Scenario, name: str, factor: float) -> Scenario:
    value = getattr(s.hardware.efficiency, name) * factor
    if name in ("gemm_compute", "memory", "attention_compute"):
        value = min(value, 1.0)
    return dataclasses.replace(s, hardware=s.hardware.with_efficiency(**{name: value}))


def _with_load(s: Scenario, factor: float) -> Scenario:
    if s.arrival is not None:
        return dataclasses.replace(s, arrival=dataclasses.replace(s.arrival, rate_rps=s.arrival.rate_rps * factor))
    return dataclasses.replace(s, buckets=tuple(dataclasses.replace(b, batch=max(1, round(b.batch * factor)))
                                                for b in s.buckets))


def _with_context(s: Scenario, factor: float) -> Scenario:
    if s.arrival is not None:
        a = s.arrival
        return dataclasses.replace(s, arrival=ArrivalLoad(a.rate_rps, max(1, round(a.prompt_tokens * factor)),
                                                          max(1, round(a.output_tokens * factor))))
    return dataclasses.replace(s, buckets=tuple(
        Bucket(b.name, b.weight, b.batch, tuple((max(1, round(cc * factor)), w) for cc, w in b.contexts))
        for b in s.buckets))


@dataclass(frozen=True)
class Replan:
    """What sensitivity needs of a re-made plan (small, so it crosses process boundaries cheaply)."""

    gain: float
    decision: tuple[str, str, tuple[int, ...]]  # method, draft, k per bucket
    recommendation: str
    error: str = ""


def replan(s: Scenario) -> Replan:
    try:
        p = make_plan(s, detail=False)  # gain and decision only: no crossovers, band or dynamic profile
    except SpecsimError as exc:
        return Replan(float("nan"), ("", "", ()), "", str(exc).removeprefix(f"{s.path}: "))
    return Replan(p.gain, _decision(p), plan_dict(p)["recommendation"])


def replan_all(scenarios: list[Scenario]) -> list[Replan]:
    """Re-make each plan (0.1-3 s each), spread over the CPUs by forked workers where the platform has
    fork, serially otherwise or if the pool fails."""
    pending = Replans(scenarios)
    try:
        return pending.results()
    finally:
        pending.close()


_JOBS: list[Scenario] = []  # set before forking: workers inherit it, no scenario is pickled


def _replan_job(i: int) -> Replan:
    return replan(_JOBS[i])


class Replans:
    """Re-made plans started at once in forked workers (where the platform forks and there are enough to
    share), so that the caller works on while they run; `results()` waits for them (serially, for any the
    pool could not run), `close()` stops the workers."""

    def __init__(self, scenarios: list[Scenario], workers: int | None = None) -> None:
        self.scenarios = scenarios
        self._pool: ProcessPoolExecutor | None = None
        self._futures: list[Future[Replan]] = []
        cpus = os.cpu_count() or 1
        workers = min(cpus if workers is None else workers, 4)
        if cpus > 1 and workers >= 1 and len(scenarios) > 2 and "fork" in multiprocessing.get_all_start_methods():
            try:
                _JOBS[:] = scenarios
                self._pool = ProcessPoolExecutor(workers, mp_context=fork_context())
                self._futures = [self._pool.submit(_replan_job, i) for i in range(len(scenarios))]
            except (OSError, RuntimeError, BrokenProcessPool):
                self.close()

    def results(self) -> list[Replan]:
        out = []
        for i, s in enumerate(self.scenarios):
            try:
                out.append(self._futures[i].result() if i < len(self._futures) else replan(s))
            except (OSError, RuntimeError, BrokenProcessPool):
                out.append(replan(s))
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._futures = []
        _JOBS.clear()


def _decision(p: Plan) -> tuple[str, str, tuple[int, ...]]:
    return p.method, (p.draft_label if p.speculates else ""), tuple(bp.k for bp in p.buckets)


def _change(base: Plan, other: Replan) -> str:
    if other.error:
        return f"no plan: {other.error}"
    b, o = _decision(base), other.decision
    if b == o:
        return "same plan"
    if o[0] == "none" and b[0] != "none":
        return "speculation off"
    if b[0] == "none" and o[0] != "none":
        return f"speculation on ({o[1]})"
    if b[1] != o[1]:
        return f"draft {b[1]} -> {o[1]}"
    what = "k" if len(b[2]) == 1 else "k per bucket"
    return f"{what} " + ",".join(map(str, b[2])) + " -> " + ",".join(map(str, o[2]))


def _swing_inputs(s: Scenario) -> list[tuple[str, tuple[float, float], Callable[[Scenario, float], Scenario], str]]:
    eff = s.hardware.efficiency
    load = "request rate" if s.arrival is not None else "batch sizes"
    ctx = "prompt and output lengths" if s.arrival is not None else "context lengths"
    return [
        ("acceptance rates", (0.8, 1.1), with_acceptance, "x"),
        (f"HBM bandwidth efficiency ({eff.memory:.2f})", (0.9, 1.1),
         lambda x, f: _with_efficiency(x, "memory", f), "x"),
        (f"GEMM compute efficiency ({eff.gemm_compute:.2f})", (0.9, 1.1),
         lambda x, f: _with_efficiency(x, "gemm_compute", f), "x"),
        (f"per-kernel overhead ({eff.kernel_overhead_us:.1f} us)", (0.5, 2.0),
         lambda x, f: _with_efficiency(x, "kernel_overhead_us", f), "x"),
        (load, (0.5, 2.0), _with_load, "x"),
        (ctx, (0.5, 2.0), _with_context, "x"),
    ]


def break_even_scales(c: Ctx) -> tuple[float | None, float | None]:
    """Bucket loads: the lowest acceptance scale (of the assumed) at which the chosen draft still pays in
    some bucket, and in every bucket (None: not even at the assumed acceptance)."""
    s, t, d = c.s, c.t, c.draft
    if s.arrival is not None or d is None:
        return None, None
    batch, ctx, share, owner = bucket_points(s.buckets)
    ev = evaluate_draft(t, d, s.max_k, batch, ctx, [Config(k) for k in range(s.max_k + 1)])  # chains: [k, point]
    step_s = ev.values["step_ms"] / 1e3
    some: float | None = None
    every: float | None = None
    every_run = True
    for f in np.round(np.arange(1.0, 0.0, -0.02), 2):
        tps = np.array([d.tokens_per_step(k, float(f)) for k in range(s.max_k + 1)])[:, None]
        vals = {"throughput_tok_s": batch * tps / step_s, "ms_per_token": step_s * 1e3 / tps}
        ks = bucket_choices(s, vals, ev.feasible, share, owner)  # chains: the index is k
        if not any(ks):
            break
        some = float(f)
        every_run = every_run and all(ks)
        if every_run:
            every = float(f)
    return some, every


Recipe = tuple[Callable[[Scenario, float], Scenario], float]


class Sensitivity:
    """The scenarios sensitivity re-plans (acceptance scaled down; each input moved down and up), each made
    once (the acceptance moved down to x0.8 is also the third acceptance row), started by `start()` in forked
    workers before the report's own plan so that they run beside it."""

    def __init__(self, s: Scenario) -> None:
        self.inputs = _swing_inputs(s)
        recipes: list[Recipe] = [(with_acceptance, f) for f in ACCEPTANCE_SCALES[1:]]
        recipes += [(fn, f) for _, lohi, fn, _ in self.inputs for f in lohi]
        unique = list(dict.fromkeys(recipes))
        self._slot = [unique.index(r) for r in recipes]
        self._jobs = [fn(s, f) for fn, f in unique]
        self._pending: Replans | None = None

    def start(self, workers: int | None = None) -> Sensitivity:
        """Begin the re-plans in `workers` forked processes (default: the CPUs, at most 4)."""
        if self._pending is None:
            self._pending = Replans(self._jobs, workers)
        return self

    def results(self) -> list[Replan]:
        """One re-made plan per recipe: acceptance scales below 1, then each input's low and high."""
        self.start()
        assert self._pending is not None
        try:
            done = self._pending.results()
        finally:
            self.close()
        return [done[i] for i in self._slot]

    def close(self) -> None:
        if self._pending is not None:
            self._pending.close()


def sensitivity_section(c: Ctx, started: Sensitivity | None = None) -> Section:
    """The section; `started` re-plans begun earlier for this scenario (`Sensitivity(c.s).start()`)."""
    s = c.s
    sens = started or Sensitivity(s)
    inputs = sens.inputs
    done = sens.results()
    acc = [Replan(c.plan.gain, _decision(c.plan), c.data["recommendation"]), *done[:len(ACCEPTANCE_SCALES) - 1]]
    gains = [r.gain for r in acc]
    rows = [[f"{f:.0%}" if f != 1 else "as assumed", r.recommendation or r.error, f"{r.gain:.2f}x",
             ",".join(str(k) for k in r.decision[2]), "-" if f == 1.0 else _change(c.plan, r)]
            for f, r in zip(ACCEPTANCE_SCALES, acc, strict=True)]
    swings, srows = [], []
    rest = done[len(ACCEPTANCE_SCALES) - 1:]
    for i, (name, (lo, hi), _, _) in enumerate(inputs):
        low, high = rest[2 * i], rest[2 * i + 1]
        swings.append(fg.Swing(name, f"x{lo:g}", f"x{hi:g}", low.gain, high.gain))
        srows.append([name] + [f"x{f:g}: " + (_change(c.plan, r) if r.error else f"{r.gain:.2f}x, {_change(c.plan, r)}")
                               for f, r in ((lo, low), (hi, high))])
    fig = fg.sensitivity(list(ACCEPTANCE_SCALES), gains, swings, c.plan.gain, c.gain_label, c.title)
    def swing(w: fg.Swing) -> float:
        ends = [g for g in (w.low_gain, w.high_gain, c.plan.gain) if np.isfinite(g)]
        return max(ends) - min(ends)

    ranked = sorted(swings, key=lambda w: -swing(w))
    flips = [r[0] for r in srows if "speculation off" in r[1] + r[2] or "draft " in r[1] + r[2]]
    no_plan = [r[0] for r in srows if "no plan" in r[1] + r[2]]
    text = ["**What if acceptance is lower than assumed?** The plan re-made with every draft's acceptance rates "
            "scaled down:", "",
            md_table(["acceptance", "recommendation", c.gain_label, "k per bucket", "change"], rows, "llrll"), ""]
    some, every = break_even_scales(c)
    if some is not None:
        text += [f"Speculation with {c.plan.draft_label} keeps paying in at least one bucket down to **{some:.0%}** of "
                 "the assumed acceptance"
                 + (f", and in every bucket down to {every:.0%}." if every is not None else ".") + "", ""]
    text += ["**Which inputs the answer hinges on.** Each input moved down and up, everything else as assumed, "
             "and the plan re-made:", "",
             md_table(["input", "moved down", "moved up"], srows, "lll"), "",
             f"The gain moves most with the {ranked[0].name.split(' (')[0]} and the "
             f"{ranked[1].name.split(' (')[0]}"
             + (f"; the recommendation itself changes with: {', '.join(x.split(' (')[0] for x in flips)}."
                if flips else "; no single move switches speculation off or changes the draft.")
             + (f" No plan exists at all when these move: {', '.join(x.split(' (')[0] for x in no_plan)} "
                "(the load no longer fits one replica)." if no_plan else "")]
    return Section("Sensitivity", "\n".join(text), fig, "sensitivity", "Sensitivity of the gain to the inputs")

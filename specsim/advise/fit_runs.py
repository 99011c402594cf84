"""`specsim fit-runs`: a deployment's own benchmark runs in, the few physical parameters they identify out.

The runs are a benchmark client's (closed-loop clients at a concurrency; calibration/runs.py reads what vLLM's,
SGLang's and AIPerf's clients write), speculation off and/or on. Each run is simulated as the client ran it
(advise/benchmark.py: the same simulation `simulate` and `validate --serving` run) with the step calibrated by
(step/evaluate.py StepCalibration):
- `host_ms`: a host cost every decode step pays beyond the engine profile's (a fixed cost per step: it weighs most
  at low concurrency);
- `pass_scale`: a scale on the target's decode passes, plain and verification (a per-token cost: it weighs most
  at high concurrency). These two need the spec-off arm at two concurrencies at least: one load cannot separate
  a fixed cost from a per-token one;
- where the engine's counters measured the acceptance, the speculative step's own fixed and per-token costs from
  the spec-on arm: `spec_host_ms`, a host cost a speculative step pays beyond host_ms (the drafting loop's
  launches, proposal and acceptance bookkeeping, a synchronous step), and `verify_scale`, a scale on the
  verification pass beyond the passes' (its B x (k + 1) tokens); the drafting loop runs at the passes' scale;
- else the acceptance, fitted as tokens per step at the runs' k (a run's figures trade the speculative step's cost
  against its acceptance: the two cannot both be read from them).
The least-squares fit is on the log of output throughput and mean TPOT. Each simulation is expensive, so the fit
runs on a surrogate and corrects it (defect correction): a run's figure at parameters p is its simulated figure at
the last simulated p0 times the ratio of the step's time per token at p and p0 at the run's batch and mean
context; the runs are re-simulated at the new p until the figures move by less than 0.2%.
Uncertainty: the parameters' covariance s^2 (J'J)^-1 from the surrogate's Jacobian at the solution, and the band
of a predicted figure, `sigma_log` = sqrt(s^2 + FORM_SIGMA^2 * 2 / loads): the residual scatter and the model's
error between measured loads (measured by benchmarks/deployment_holdout.py), shrinking as loads are added.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from specsim.advise.benchmark import BenchmarkFlags, benchmark_scenario
from specsim.advise.simulation import Setup
from specsim.errors import SpecsimError
from specsim.scenario.deployment import QUESTION, Deployment
from specsim.scenario.scenario import Scenario
from specsim.step.evaluate import StepCalibration

#: the 1-sd log error the model adds between two measured loads of a deployment, beyond the fit's own residual
#: scatter: the value at which the 80% band holds 80% of the held-out figures when each deployment of
#: specsim/validation/data/serving.csv is fitted on its lowest and highest load (benchmarks/deployment_holdout.py,
#: 476 figures of 24 deployments, acceptance given and fitted: 79.8%; in-sample for this one number). Small: the
#: fit's residual scatter at the loads it saw already carries most of the error between them.
FORM_SIGMA = 0.01
MAX_ROUNDS = 8


@dataclass(frozen=True)
class Point:
    """One benchmark run: its arm, the client's load (closed-loop clients, or an open-loop rate) and lengths, and
    the two figures fitted (and the time to first token, for an open loop's requests in flight)."""

    arm: str  # off | on
    concurrency: int | None
    input_len: int
    output_len: int
    output_tok_s: float
    tpot_mean_ms: float
    num_prompts: int | None = None
    label: str = ""
    rate_rps: float | None = None  # an open loop's request rate (Poisson, as the clients send it)
    ttft_mean_ms: float = float("nan")

    @property
    def load(self) -> str:
        return f"concurrency {self.concurrency}" if self.rate_rps is None else f"rate {self.rate_rps:g}/s"

    @property
    def key(self) -> tuple[int, float, int, int, int]:
        return (self.concurrency or 0, self.rate_rps or 0.0, self.input_len, self.output_len, self.num_prompts or 0)

    def in_flight(self, limit: int) -> float:
        """The requests running at once: the clients (closed loop), or by Little's law the rate times a
        request's measured latency (open loop), within the engine's limit."""
        if self.rate_rps is None:
            return float(min(self.concurrency or 1, limit))
        ttft = self.ttft_mean_ms if math.isfinite(self.ttft_mean_ms) else 0.0
        latency_s = (ttft + max(self.output_len - 1, 0) * self.tpot_mean_ms) / 1e3
        return float(min(max(self.rate_rps * latency_s, 1.0), limit))


@dataclass(frozen=True)
class Fit:
    deployment: Deployment
    predicted: np.ndarray  # (runs, 2): output tok/s and mean TPOT ms at the fitted parameters
    rounds: int


def simulate_points(flags: BenchmarkFlags, cal: StepCalibration, tau: float | None,
                    points: Sequence[Point]) -> np.ndarray:
    """Each run's (output tok/s, mean TPOT ms, tokens per step) simulated for its arm (module docstring)."""
    from specsim.advise.simulation import make_setup, sweep_cases
    from specsim.simulate.client import client_columns
    from specsim.simulate.frontier import configuration
    from specsim.simulate.sweep import SweepBatch
    from specsim.step.policy import Policy

    keys = sorted({p.key for p in points})
    sweeps, setups = [], []
    for c, rate, i, o, n in keys:
        f = dataclasses.replace(flags, concurrency=(c or 1,), input_len=i, output_len=o,
                                acceptance_length=tau if tau is not None else flags.acceptance_length)
        s = dataclasses.replace(_scenario(f), calibration=cal)
        setup = make_setup(s, policy=Policy.static(int(flags.k or 1)))
        sweeps.append(sweep_cases(setup, [rate] if rate else None, None, None, None if rate else [c], n or None))
        setups.append(setup)
    by_key = {}
    for key, setup, frame in zip(keys, setups, SweepBatch(sweeps).frames(), strict=True):
        cols = client_columns(frame, setup.gpus_per_replica, "vllm")
        labels = [configuration(d, p) for d, p in zip(frame["draft"], frame["policy"], strict=True)]
        for arm, want in (("off", True), ("on", False)):
            row = cols[[(lab == "off") == want for lab in labels]].iloc[0]
            by_key[(key, arm)] = (float(row["output_tok_s"]), float(row["tpot_mean_ms"]),
                                  float(row.get("acceptance_length", 1.0)))
    return np.array([by_key[(p.key, p.arm)] for p in points])


@lru_cache(maxsize=64)
def _scenario(f: BenchmarkFlags) -> Scenario:
    """A run's scenario, parsed once per fit: its engine and hardware profiles the same objects every round, so
    that the passes' memo (engines/passes.py, keyed on the profiles' identity) serves every round after the
    first."""
    return benchmark_scenario(f)


def _per_token_s(flags: BenchmarkFlags, cal: StepCalibration, tau: float, pts: Sequence[Point]) -> np.ndarray:
    """The step's time per token at each run's batch and mean context (the surrogate's ratio, module docstring),
    in one step_arrays call over the runs (a stage's runs are one arm)."""
    from specsim.step.evaluate import step_arrays

    setup = _setup(flags)
    t = dataclasses.replace(setup.target, calibration=cal)
    k = 0 if pts[0].arm == "off" else int(flags.k or 1)
    batch = np.array([p.in_flight(setup.limits.max_num_seqs) for p in pts])
    ctx = np.array([p.input_len + p.output_len / 2 for p in pts])
    tokens = 1.0 if k == 0 else tau
    return np.asarray(step_arrays(t, setup.draft, k, batch, ctx, tokens).step_time_s, dtype=float) / tokens


@lru_cache(maxsize=4)
def _setup(flags: BenchmarkFlags) -> Setup:
    """The runs' question set up once per fit (its draft and limits for the surrogate and the acceptance)."""
    from specsim.advise.simulation import make_setup
    from specsim.step.policy import Policy

    return make_setup(_scenario(flags), policy=Policy.static(int(flags.k or 1)))


@dataclass(frozen=True)
class _Stage:
    """One least-squares fit: its runs, the parameters it frees, those it holds (module docstring)."""

    points: tuple[Point, ...]
    names: tuple[str, ...]
    held: dict[str, float]


def stages(points: Sequence[Point], counters: bool) -> list[_Stage]:
    """The fits the runs identify, in order: the spec-off arm's host cost and pass scale, then the spec-on arm's
    own host cost and verification scale (acceptance counted) or its acceptance; SpecsimError naming the run that
    is missing."""
    loads = {arm: sorted({p.load for p in points if p.arm == arm}) for arm in ("off", "on")}
    off, on = loads["off"], loads["on"]
    if not off and not on:
        raise SpecsimError("fit-runs: no runs given (--off FILE and/or --on FILE)")
    if len(off) == 1 or (not off and len(on) < 2):
        arm, got = ("off", off) if off else ("on", on)
        raise SpecsimError(f"fit-runs: the spec-{arm} arm at one load ({got[0]}) cannot separate the step's fixed "
                           f"host cost from its per-token cost: add a spec-{arm} run at another load")
    if not off and not counters:
        raise SpecsimError("fit-runs: without a spec-off arm the acceptance must be measured: give the engine's "
                           "counters (--metrics BEFORE AFTER or --server-log) or spec-off runs at two loads")
    by_arm = {a: tuple(p for p in points if p.arm == a) for a in ("off", "on")}
    if not off:
        return [_Stage(by_arm["on"], ("host_ms", "pass_scale"), {})]
    first = _Stage(by_arm["off"], ("host_ms", "pass_scale"), {})
    if not on:
        return [first]
    # with the acceptance counted, the spec-on arm measures the speculative step's own fixed and per-token costs
    # (its host cost, its verification); without, its acceptance (which trades against those in a run's figures)
    return [first, _Stage(by_arm["on"], ("spec_host_ms", "verify_scale") if counters else ("tau",), {})]


def _unpack(v: dict[str, float], tau0: float) -> tuple[StepCalibration, float]:
    return StepCalibration(v.get("host_ms", 0.0), math.exp(v.get("pass_scale", 0.0)),
                           math.exp(v.get("verify_scale", 0.0)), v.get("spec_host_ms", 0.0)), v.get("tau", tau0)


#: each parameter's bounds (the scales in log)
LOWER = {"host_ms": -20.0, "pass_scale": math.log(0.2), "verify_scale": math.log(0.1), "spec_host_ms": -20.0,
         "tau": 1.0}
UPPER = {"host_ms": 200.0, "pass_scale": math.log(5.0), "verify_scale": math.log(20.0), "spec_host_ms": 500.0}


def _fit_stage(flags: BenchmarkFlags, st: _Stage, tau: float, tau_given: float | None,
               progress: Callable[[str], None] | None) -> tuple[dict[str, float], np.ndarray, np.ndarray, int]:
    """One stage's least squares on the surrogate, re-simulated until it holds (module docstring): (the values,
    their covariance, the runs' simulated figures, rounds)."""
    from scipy.optimize import least_squares

    pts, k = st.points, int(flags.k or 1)
    meas = np.log(np.array([[p.output_tok_s, p.tpot_mean_ms] for p in pts]))
    # the speculative step's host cost starts where the step's total host cost is positive: a step floored at its
    # kernels' time (step/evaluate.py) has no slope in it below that
    start = {"host_ms": 0.0, "pass_scale": 0.0, "verify_scale": 0.0,
             "spec_host_ms": max(0.0, -st.held.get("host_ms", 0.0)) + 0.1,
             "tau": min(max(tau, 1.0 + 1e-6), k + 1 - 1e-6)}
    x = np.array([start[n] for n in st.names])
    lo, hi = [LOWER[n] for n in st.names], [UPPER.get(n, k + 1.0) for n in st.names]

    def values(y: np.ndarray) -> dict[str, float]:
        return {**st.held, **dict(zip(st.names, y.tolist(), strict=True))}

    def acceptance(y: np.ndarray) -> float | None:
        return values(y).get("tau", tau_given)

    sim = simulate_points(flags, _unpack(values(x), tau)[0], acceptance(x), pts)
    sign = np.array([-1.0, 1.0])  # throughput falls and TPOT rises with the time per token
    gain = np.ones_like(meas)  # d log(figure) / d log(time per token): 1 until two simulations measure it
    last: tuple[np.ndarray, np.ndarray] | None = None
    for rounds in range(1, MAX_ROUNDS + 1):
        base = np.log(_per_token_s(flags, *_unpack(values(x), tau), pts))
        logsim = np.log(sim[:, :2])
        if last is not None:  # the secant: how far each figure moved for how far its step moved
            dr = (base - last[0])[:, None] * sign
            ok = np.abs(dr) > 1e-4
            gain = np.where(ok, np.clip((logsim - last[1]) / np.where(ok, dr, 1.0), 0.1, 2.0), gain)
        last = (base, logsim)

        def surrogate(y: np.ndarray, base: np.ndarray = base, logsim: np.ndarray = logsim,
                      gain: np.ndarray = gain) -> np.ndarray:
            r = np.log(_per_token_s(flags, *_unpack(values(y), tau), pts)) - base
            return np.asarray(logsim + gain * sign * r[:, None], dtype=float)

        def residuals(y: np.ndarray, surrogate: Callable[[np.ndarray], np.ndarray] = surrogate) -> np.ndarray:
            # a figure the client did not record weighs nothing
            return np.asarray(np.nan_to_num(surrogate(y) - meas), dtype=float).ravel()

        sol = least_squares(residuals, x, bounds=(lo, hi), x_scale="jac")
        x = sol.x
        if progress:
            progress(f"{'spec-' + pts[0].arm + ' arm':12s} round {rounds}: "
                     + ", ".join(f"{n} {v:.4g}" for n, v in _shown(values(x)).items()))
        new = simulate_points(flags, _unpack(values(x), tau)[0], acceptance(x), pts)
        moved = float(np.nanmax(np.abs(np.log(new[:, :2]) - surrogate(x))))
        sim = new
        if moved < 2e-3:
            break
    resid = np.log(sim[:, :2]) - meas
    dof = max(int(np.isfinite(resid).sum()) - len(st.names), 1)
    cov = float(np.nansum(resid**2) / dof) * np.linalg.pinv(sol.jac.T @ sol.jac)
    return dict(zip(st.names, x.tolist(), strict=True)), cov, sim, rounds


def _shown(v: dict[str, float]) -> dict[str, float]:
    return {n: math.exp(x) if n.endswith("scale") else x for n, x in v.items()}


def fit_points(flags: BenchmarkFlags, points: Sequence[Point], tau_measured: float | None = None,
               progress: Callable[[str], None] | None = None
               ) -> tuple[dict[str, float], dict[str, float], np.ndarray, StepCalibration, float, int]:
    """Every stage's fit (module docstring): (parameter values, their SDs, the runs' figures at the solution, the
    calibration, the acceptance length at k, simulation rounds)."""
    plan = stages(points, tau_measured is not None)
    tau = tau_measured if tau_measured is not None else 1.0
    if tau_measured is None and any(p.arm == "on" for p in points):  # the prior's, where the fit starts
        on = [p for p in points if p.arm == "on"][:1]
        tau = float(simulate_points(flags, StepCalibration(), None, on)[0, 2])
    values: dict[str, float] = {}
    sds: dict[str, float] = {}
    sim = np.full((len(points), 3), np.nan)
    rounds = 0
    for st in plan:
        st = dataclasses.replace(st, held=dict(values))
        v, cov, s, r = _fit_stage(flags, st, tau, tau_measured, progress)
        values.update(v)
        sds.update(zip(v, np.sqrt(np.maximum(np.diag(cov), 0.0)).tolist(), strict=True))
        at = [i for i, p in enumerate(points) if p in st.points]
        sim[at] = s
        rounds += r
    cal, tau_final = _unpack(values, tau_measured if tau_measured is not None else tau)
    return values, sds, sim, cal, float(tau_final), rounds


def fit_deployment(flags: BenchmarkFlags, points: Sequence[Point], alphas_measured: Sequence[float] = (),
                   tau_measured: float | None = None, runs: Sequence[str] = (),
                   progress: Callable[[str], None] | None = None) -> Fit:
    """The deployment the runs identify (module docstring), with its uncertainty and each run's residuals."""
    values, sds, sim, cal, tau, rounds = fit_points(flags, points, tau_measured, progress)
    params: dict[str, dict[str, float]] = {}
    for n, v in values.items():
        params[n] = {"value": math.exp(v), "sd_log": sds[n]} if n.endswith("scale") else {"value": v, "sd": sds[n]}
    resid = np.log(sim[:, :2]) - np.log(np.array([[p.output_tok_s, p.tpot_mean_ms] for p in points]))
    dof = max(int(np.isfinite(resid).sum()) - len(values), 1)
    loads = max(len({p.load for p in points if p.arm == arm}) for arm in ("off", "on"))
    sigma = math.sqrt(float(np.nansum(resid**2)) / dof + FORM_SIGMA**2 * 2.0 / max(loads, 2))
    cal = dataclasses.replace(cal, sigma_log=sigma)
    alphas, source = _alphas(flags, tau, alphas_measured, tau_measured)
    question = {n: getattr(flags, n) for n in QUESTION if getattr(flags, n, None) is not None}
    question["draft"] = ",".join(flags.drafts)
    # the lengths the runs sent (the runs' median), where another question starts from
    question["input_len"] = int(np.median([p.input_len for p in points]))
    question["output_len"] = int(np.median([p.output_len for p in points]))
    residuals = tuple({"run": p.label, "arm": p.arm, "load": p.load, "concurrency": p.concurrency,
                       "rate_rps": p.rate_rps, "num_prompts": p.num_prompts,
                       "ttft_mean_ms": p.ttft_mean_ms if math.isfinite(p.ttft_mean_ms) else None,
                       "output_tok_s": p.output_tok_s, "fitted_output_tok_s": round(float(sim[i, 0]), 4),
                       "tpot_mean_ms": p.tpot_mean_ms, "fitted_tpot_mean_ms": round(float(sim[i, 1]), 4)}
                      for i, p in enumerate(points))
    arms = tuple(a for a in ("off", "on") if any(p.arm == a for p in points))
    dep = Deployment(question, cal, alphas, source, sigma, params, residuals, tuple(runs), arms=arms)
    return Fit(dep, sim[:, :2], rounds)


#: positions a deployment states acceptance for: the runs' k, and past it the prior's shape at the runs' level
POSITIONS = 8


def _alphas(flags: BenchmarkFlags, tau: float, measured: Sequence[float], tau_measured: float | None
            ) -> tuple[tuple[float, ...], str]:
    """The conditional acceptance per position, POSITIONS of them: the counters' own at the measured positions,
    else the draft's prior scaled to the tokens per step at k (measured or fitted); past the measured positions
    the prior's shape at that level (the prior's scale fitted on the positions measured)."""
    from scipy.optimize import brentq

    draft = _setup(flags).draft
    k = int(flags.k or 1)
    if not draft.speculates or (tau <= 1.0 and not measured):
        return (), ""
    prior = np.asarray(draft.rates(max(POSITIONS, len(measured))), float)
    if measured:
        head = np.asarray(measured, float)
        scale = float(np.mean(head / np.maximum(prior[:len(head)], 1e-9)))
        tail = np.clip(prior[len(head):] * scale, 0.0, 1.0)
        return tuple(round(float(a), 6) for a in (*head, *tail)), "counters"

    def gap(scale: float) -> float:
        return float(draft.tokens_per_step(k, scale)) - tau

    top = 1.0 / max(float(np.max(draft.rates(k))), 1e-9)
    scale = brentq(gap, 1e-6, top) if gap(1e-6) < 0 < gap(top) else (top if gap(top) < 0 else 1e-6)
    return tuple(round(float(a), 6) for a in draft.rates(max(POSITIONS, k), scale)), \
        "counters" if tau_measured is not None else "fitted"


def flags_of(d: Deployment) -> BenchmarkFlags:
    """The benchmark question a deployment's runs asked (its `question`), as `simulate` takes it."""
    q = d.question
    return BenchmarkFlags(
        hardware=str(q["hardware"]), model=str(q["model"]), drafts=(d.draft,), tp=int(q.get("tp", 1)),
        dp=int(q.get("dp", 1)), ep=int(q.get("ep", 1)), engine=q.get("engine"),
        weight_dtype=str(q.get("weight_dtype", "native")), kv_dtype=str(q.get("kv_dtype", "bf16")),
        k=int(q.get("k") or 1), input_len=int(q.get("input_len", 1024)), output_len=int(q.get("output_len", 1024)),
        range_ratio=q.get("range_ratio"), client=q.get("client"), prompts=q.get("prompts"),
        max_num_seqs=q.get("max_num_seqs"))


def run_points(d: Deployment) -> list[Point]:
    """The runs a deployment was fitted to, as they were fitted (its residuals)."""
    out = int(d.question.get("output_len", 1024))
    inp = int(d.question.get("input_len", 1024))
    return [Point(str(r["arm"]), r.get("concurrency"), inp, out, float(r["output_tok_s"]), float(r["tpot_mean_ms"]),
                  r.get("num_prompts"), str(r.get("run", "")), r.get("rate_rps"),
                  float(r.get("ttft_mean_ms") or math.nan)) for r in d.residuals
            if r.get("concurrency") is not None or r.get("rate_rps") is not None]


def heaviest_load(d: Deployment) -> int:
    """The most requests in flight the runs measured (`Point.in_flight`: a closed loop's clients, an open loop's
    by Little's law); 1 where the file records no load."""
    return max([1, *(round(p.in_flight(1 << 30)) for p in run_points(d))])


def deployment_scenario(path: Path) -> Scenario:
    """The question a fitted deployment's runs asked, as a scenario for `plan` and `report` without one: the
    client's closed loop at the heaviest load the runs measured (`heaviest_load`), their lengths, the deployment's
    draft and k, priced calibrated (its `deployment:` field)."""
    from specsim.advise.benchmark import benchmark_data
    from specsim.scenario.deployment import load_deployment
    from specsim.scenario.scenario import parse_scenario

    d = load_deployment(path)
    flags = flags_of(d)
    data = benchmark_data(flags.given(), (heaviest_load(d),))
    s = parse_scenario({**data, "name": Path(path).stem, "deployment": str(Path(path).resolve())},
                       f"{path} (its runs' question)")
    assert s.serving is not None
    return dataclasses.replace(s, serving=dataclasses.replace(s.serving, seqs_given=flags.max_num_seqs is not None))

"""The `traffic:` and `serving:` sections of a scenario file, parsed into typed values.

Errors name the file, the line of the offending key and the field, e.g.
``chat.yaml line 14: traffic.prompt: field 'sigma' must be a number in [0, 10), got -1``.
`yaml_lines` maps dotted paths to line numbers; callers that already hold the parsed mapping pass
those lines (or none: the message then names the file and field only).

traffic:
  arrivals: {process: poisson, rate_rps: 12}          # or gamma (+ cv), constant, curve, trace, closed
    # closed: {process: closed, concurrency: 64}: 64 clients, each sending its next request when its last one
    #         finishes (a benchmark client's --max-concurrency 64 --request-rate inf); poisson, gamma and
    #         constant take a concurrency too (--request-rate R --max-concurrency N)
    # curve: {process: curve, hourly_rps: [24 values]} or {process: curve, points: [[hour, rps], ...]},
    #        optional cv (default 1), start_hour (default 0)
    # trace: {process: trace, path: azure_conv.csv, layout: auto, speedup: 1, start_s: 0, model: GPT-4}
  num_requests: 20000                                  # or duration_s (a trace replays to its end)
  prompt: {dist: lognormal, median: 1024, sigma: 0.9, max: 32768}   # or {dist: lognormal, mean, cv},
  output: {dist: fixed, tokens: 256}                   # {dist: fixed, tokens}, {dist: trace[, path]},
    # {dist: uniform, low, high}, {dist: random, tokens: 1024, range_ratio: 0.8, client: sglang} (a benchmark
    # client's random lengths: sglang / atom [r L, L], vllm [(1 - r) L, (1 + r) L])
  workloads:                                           # acceptance mix (per-position conditional rates)
    - {name: chat, share: 0.6, alphas: [0.8, 0.75, 0.7]}
    - {name: code, share: 0.4, task: code}             # or a task: its sourced prior for the simulated draft
    - {name: other, share: 0.1}                        # or neither: the draft's own acceptance
  seed: 0
serving:
  max_num_seqs: 256
  max_num_batched_tokens: 8192
  kv_capacity_tokens: 500000                           # else the caller's memory model decides
  draft: eagle3                                        # which of the scenario's drafts (default: the plan's)
  speculation: {k: 4, disable_above_batch: 64}         # plan (default) | off | {k} | {schedule: [[1, 16, 4], ...]}
  slo: {ttft_ms: 500, tpot_ms: 50, percentile: 99}
  target_rate_rps: 40                                  # replicas for this rate
  gpus_per_replica: 8
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specsim.acceptance.priors import TASKS, task_of_dataset
from specsim.errors import SpecsimError
from specsim.files import read_yaml_mapping
from specsim.scenario.kv_cache import DEFAULT_KV_LINK_GB_PER_S, KvCacheSpec, PoolsSpec, parse_pd
from specsim.scenario.serving import SLO, EngineConfig
from specsim.scenario.traces import Trace, read_trace
from specsim.scenario.traffic import (
    Arrivals,
    Constant,
    Empirical,
    Fixed,
    Gamma,
    LengthDist,
    Lognormal,
    Poisson,
    RateCurve,
    Saturated,
    SessionShape,
    TraceArrivals,
    Traffic,
    Uniform,
    range_ratio_lengths,
)
from specsim.scenario.where import Where, mapping, number, only, yaml_lines
from specsim.scenario.workload import AcceptanceMix, Workload
from specsim.step.policy import Policy

MAX_REQUESTS = 10_000_000  # requests one run may simulate (a bound on input, not a model limit)
MAX_SEQS = 4096  # the step table holds every batch up to this at every k
MAX_BUDGET = 10_000_000


def _model(raw: Mapping[str, object]) -> str | None:
    """A trace's `model:` filter (None: every row)."""
    model = raw.get("model")
    return None if model is None else str(model)


def _path(raw: Mapping[str, object], where: Where, base_dir: Path) -> Path:
    value = raw.get("path")
    if not isinstance(value, str) or not value:
        raise where.error(f"field 'path' must be a file path, got {value!r}", "path")
    p = Path(value)
    return p if p.is_absolute() else base_dir / p


def parse_arrivals(raw: object, where: Where, base_dir: Path) -> Arrivals:
    """{process: poisson | gamma | curve | trace, ...} -> an arrival process."""
    raw = mapping(raw, where, "process: poisson | gamma | constant | curve | trace | closed")
    process = raw.get("process", "poisson")
    if process == "closed":
        only(raw, where, {"process", "concurrency"})
        if "concurrency" not in raw:
            raise where.error("missing field 'concurrency' (the clients sending requests)")
        return Saturated()
    if process == "poisson":
        only(raw, where, {"process", "rate_rps", "concurrency"})
        return Poisson(number(raw, "rate_rps", where, lo=0, strict_lo=True))
    if process == "constant":
        only(raw, where, {"process", "rate_rps", "concurrency"})
        return Constant(number(raw, "rate_rps", where, lo=0, strict_lo=True))
    if process == "gamma":
        only(raw, where, {"process", "rate_rps", "cv", "concurrency"})
        return Gamma(number(raw, "rate_rps", where, lo=0, strict_lo=True), number(raw, "cv", where, lo=0,
                                                                                     strict_lo=True))
    if process == "curve":
        only(raw, where, {"process", "hourly_rps", "points", "cv", "start_hour"})
        cv = number(raw, "cv", where, 1.0, lo=0, strict_lo=True)
        start = number(raw, "start_hour", where, 0.0, lo=0)
        if ("hourly_rps" in raw) == ("points" in raw):
            raise where.error("give exactly one of 'hourly_rps' (24 rates) and 'points' ([[hour, rate], ...])")
        if "hourly_rps" in raw:
            rates = raw["hourly_rps"]
            if not isinstance(rates, list) or len(rates) != 24:
                raise where.error(f"field 'hourly_rps' must be a list of 24 rates, got {rates!r}", "hourly_rps")
            values = [number({"hourly_rps": r}, "hourly_rps", where.at("hourly_rps").at(i), lo=0)
                      for i, r in enumerate(rates)]
            return where.build(lambda: RateCurve.hourly(values, cv, start), "hourly_rps")
        pts = raw["points"]
        if not isinstance(pts, list) or not pts or any(not isinstance(p, list) or len(p) != 2 for p in pts):
            raise where.error(f"field 'points' must be a list of [hour, rate_rps] pairs, got {pts!r}", "points")
        hours = [number({"hour": p[0]}, "hour", where.at("points").at(i), lo=0) for i, p in enumerate(pts)]
        rates_l = [number({"rate_rps": p[1]}, "rate_rps", where.at("points").at(i), lo=0) for i, p in enumerate(pts)]
        return where.build(lambda: RateCurve(tuple(hours), tuple(rates_l), "linear", cv, start), "points")
    if process == "trace":
        only(raw, where, {"process", "path", "layout", "speedup", "start_s", "model"})
        trace = read_trace(_path(raw, where, base_dir), str(raw.get("layout", "auto")), _model(raw))
        return TraceArrivals(trace, number(raw, "speedup", where, 1.0, lo=0, strict_lo=True),
                             number(raw, "start_s", where, 0.0, lo=0))
    raise where.error(f"field 'process' must be one of poisson, gamma, constant, curve, trace, closed; got "
                      f"{process!r}", "process")


def parse_concurrency(raw: object, where: Where) -> int | None:
    """The arrivals' `concurrency` (closed-loop clients), None when absent."""
    if not isinstance(raw, Mapping) or "concurrency" not in raw:
        return None
    return int(number(dict(raw), "concurrency", where, lo=1, integer=True))


def parse_lengths(raw: object, where: Where, base_dir: Path, trace: Trace | None = None) -> LengthDist | None:
    """{dist: fixed | lognormal | trace, ...} -> a length distribution (None: the replayed trace's own)."""
    field = where.path.rpartition(".")[2] or "prompt"
    if isinstance(raw, int) and not isinstance(raw, bool):
        tokens = raw
        return where.build(lambda: Fixed(tokens))
    raw = mapping(raw, where, "dist: fixed | uniform | random | lognormal | trace")
    dist = raw.get("dist")
    if dist == "uniform":
        only(raw, where, {"dist", "low", "high"})
        low, high = (number(raw, key, where, lo=1, integer=True) for key in ("low", "high"))
        return where.build(lambda: Uniform(low, high), "high")
    if dist == "random":
        only(raw, where, {"dist", "tokens", "range_ratio", "client"})
        tokens = number(raw, "tokens", where, lo=1, integer=True)
        ratio = number(raw, "range_ratio", where, 0.0, lo=0)
        client = str(raw.get("client", "sglang"))
        return where.build(lambda: range_ratio_lengths(tokens, ratio, client), "range_ratio")
    if dist == "fixed":
        only(raw, where, {"dist", "tokens"})
        tokens = number(raw, "tokens", where, lo=1, integer=True)
        return Fixed(tokens)
    if dist == "lognormal":
        only(raw, where, {"dist", "median", "sigma", "mean", "cv", "min", "max"})
        lo = number(raw, "min", where, 1, lo=1, integer=True)
        hi = number(raw, "max", where, 0, lo=1, integer=True) if "max" in raw else None
        if "median" in raw or "sigma" in raw:
            if "mean" in raw or "cv" in raw:
                raise where.error("give median + sigma or mean + cv, not both", "mean" if "mean" in raw else "cv")
            median = number(raw, "median", where, lo=0, strict_lo=True)
            sigma = number(raw, "sigma", where, lo=0)
            return where.build(lambda: Lognormal(median, sigma, lo, hi))
        mean = number(raw, "mean", where, lo=0, strict_lo=True)
        cv = number(raw, "cv", where, lo=0)
        return where.build(lambda: Lognormal.from_mean_cv(mean, cv, lo, hi))
    if dist == "trace":
        only(raw, where, {"dist", "path", "layout", "model"})
        if "path" in raw:
            trace = read_trace(_path(raw, where, base_dir), str(raw.get("layout", "auto")), _model(raw))
        if trace is None:
            raise where.error("field 'path' is needed: the arrivals replay no trace", "path")
        return Empirical.from_trace(trace, "output" if field == "output" else "prompt")
    raise where.error(f"field 'dist' must be one of fixed, uniform, random, lognormal, trace; got {dist!r}", "dist")


def parse_workloads(raw: object, where: Where) -> tuple[Workload, ...]:
    """[{name, share, alphas: [...] | task: TASK}, ...] -> workloads (neither: the draft's own acceptance)."""
    if not isinstance(raw, list) or not raw:
        raise where.error(f"expected a list of {{name, share, alphas | task}}, got {raw!r}")
    out = []
    for i, item in enumerate(raw):
        w = where.at(i)
        item = mapping(item, w, "name, share, alphas | task")
        only(item, w, {"name", "share", "alphas", "task"})
        alphas = item.get("alphas")
        if isinstance(alphas, int | float) and not isinstance(alphas, bool):
            alphas = [alphas]
        if alphas is not None and (not isinstance(alphas, list) or not alphas or any(
                isinstance(a, bool) or not isinstance(a, int | float) or not 0 <= a <= 1 for a in alphas)):
            raise w.error(f"field 'alphas' must be a list of acceptance rates in [0, 1], got {alphas!r}", "alphas")
        task = item.get("task")
        if task is not None:
            if alphas is not None:
                raise w.error("give 'alphas' or 'task', not both", "task")
            if not isinstance(task, str) or task_of_dataset(task) is None:
                raise w.error(f"field 'task' must be one of {', '.join(TASKS)}, got {task!r}", "task")
        share = number(item, "share", w, 1.0, lo=0, strict_lo=True)
        out.append(Workload(str(item.get("name", f"workload{i}")), share,
                            None if alphas is None else tuple(float(a) for a in alphas), task))
    return tuple(out)


def parse_mix(raw: object, where: Where) -> AcceptanceMix:
    """[{name, share, alphas: [...]}, ...] -> AcceptanceMix (every workload with its own alphas)."""
    classes = []
    for i, wl in enumerate(parse_workloads(raw, where)):
        c = wl.resolved()
        if c is None:
            raise where.at(i).error("missing field 'alphas'", "alphas")
        classes.append(c)
    return AcceptanceMix(tuple(classes))


def parse_policy(raw: object, where: Where) -> Policy:
    """off | k | {k, disable_above_batch} | {schedule: [[from, to, k], ...], k (elsewhere), disable_above_batch}, or
    a policy as `simulate --policy` spells it ("k=4,off>64", "1-16:4,17-64:2")."""
    if raw is None or raw is False or raw == "off" or raw == 0:
        return Policy.off()
    if isinstance(raw, str):
        text = raw
        return where.build(lambda: Policy.parse(text, "speculation"))
    if isinstance(raw, int) and not isinstance(raw, bool):
        k = raw
        return where.build(lambda: Policy.static(k), "k")
    raw = mapping(raw, where, "off, or k / schedule / disable_above_batch")
    only(raw, where, {"k", "schedule", "disable_above_batch"})
    k = number(raw, "k", where, 0, lo=0, integer=True)
    off_above = number(raw, "disable_above_batch", where, 0, lo=0, integer=True) if (
        "disable_above_batch" in raw) else None
    sched = raw.get("schedule", [])
    if not isinstance(sched, list) or any(not isinstance(s, list) or len(s) != 3 for s in sched):
        raise where.error(f"field 'schedule' must be a list of [batch_from, batch_to, k], got {sched!r}", "schedule")
    return where.build(lambda: Policy.of_ranges(k, sched, off_above), "schedule")


@dataclass(frozen=True)
class ServingSpec:
    """The serving section: engine limits and policy (KV capacity may come from the memory model), SLO, plan."""

    max_num_seqs: int
    max_num_batched_tokens: int
    kv_capacity_tokens: int | None
    policy: Policy
    slo: SLO | None
    target_rate_rps: float | None
    gpus_per_replica: int | None
    draft: str | None = None  # the scenario draft simulated (its label); None: the analytic plan's choice
    plan_policy: bool = False  # speculation absent or 'plan': the analytic plan's policy for the draft
    seqs_given: bool = False  # max_num_seqs was set (else an engine's own cap under speculation applies)
    kv_cache: KvCacheSpec = field(default_factory=KvCacheSpec)
    pools: PoolsSpec | None = None  # prefill / decode pools to compare (specsim pools, the report)

    def engine(self, kv_capacity_tokens: int | None = None) -> EngineConfig:
        """EngineConfig with the file's KV capacity, else the one given (from the memory model)."""
        kv = self.kv_capacity_tokens if self.kv_capacity_tokens is not None else kv_capacity_tokens
        if kv is None:
            raise SpecsimError("serving: no 'kv_capacity_tokens' in the file and none from the memory model")
        return EngineConfig(self.max_num_seqs, self.max_num_batched_tokens, int(kv), self.policy)


def parse_serving(raw: object, where: Where) -> ServingSpec:
    raw = mapping(raw if raw is not None else {}, where, "serving limits, speculation, slo")
    only(raw, where, {"max_num_seqs", "max_num_batched_tokens", "kv_capacity_tokens", "speculation", "slo",
                       "target_rate_rps", "gpus_per_replica", "draft", "kv_cache", "pools"})
    seqs = number(raw, "max_num_seqs", where, 256, lo=1, integer=True)
    budget = number(raw, "max_num_batched_tokens", where, 8192, lo=1, integer=True)
    kv = number(raw, "kv_capacity_tokens", where, lo=1, integer=True) if "kv_capacity_tokens" in raw else None
    if seqs > MAX_SEQS or budget > MAX_BUDGET:
        key = "max_num_seqs" if seqs > MAX_SEQS else "max_num_batched_tokens"
        raise where.error(f"field '{key}' must be at most {MAX_SEQS if seqs > MAX_SEQS else MAX_BUDGET:,}", key)
    if budget < seqs:
        raise where.error(f"field 'max_num_batched_tokens' ({budget}) must be >= max_num_seqs ({seqs})",
                          "max_num_batched_tokens")
    spec_raw = raw.get("speculation", "plan")
    from_plan = spec_raw == "plan"
    policy = Policy.off() if from_plan else parse_policy(spec_raw, where.at("speculation"))
    draft = raw.get("draft")
    if draft is not None and (not isinstance(draft, str) or not draft):
        raise where.error(f"field 'draft' must name one of the scenario's drafts, got {draft!r}", "draft")
    slo = None
    if raw.get("slo") is not None:
        w = where.at("slo")
        s = mapping(raw["slo"], w, "ttft_ms, tpot_ms, percentile")
        only(s, w, {"ttft_ms", "tpot_ms", "percentile"})
        pct = number(s, "percentile", w, 99.0, lo=0, strict_lo=True)
        if pct > 100:
            raise w.error(f"field 'percentile' must be in (0, 100], got {pct:g}", "percentile")
        slo = SLO(number(s, "ttft_ms", w, lo=0, strict_lo=True) / 1e3,
                  number(s, "tpot_ms", w, lo=0, strict_lo=True) / 1e3, pct)
    rate = number(raw, "target_rate_rps", where, lo=0, strict_lo=True) if "target_rate_rps" in raw else None
    gpus = number(raw, "gpus_per_replica", where, lo=1, integer=True) if "gpus_per_replica" in raw else None
    cache = parse_kv_cache(raw["kv_cache"], where.at("kv_cache")) if "kv_cache" in raw else KvCacheSpec()
    pools = parse_pools(raw["pools"], where.at("pools")) if "pools" in raw else None
    return ServingSpec(seqs, budget, kv, policy, slo, rate, gpus, draft, from_plan, "max_num_seqs" in raw, cache,
                       pools)


def parse_pools(raw: object, where: Where) -> PoolsSpec:
    """serving.pools: pd ('1:1,1:2'), kv_link_gb_per_s, kv_latency_ms (scenario/kv_cache.py `PoolsSpec`)."""
    raw = mapping(raw, where, "pd, kv_link_gb_per_s, kv_latency_ms")
    only(raw, where, {"pd", "kv_link_gb_per_s", "kv_latency_ms"})
    pd_text = raw.get("pd", "1:1,1:2,2:1")
    pd = where.build(lambda: parse_pd(str(pd_text)), "pd")
    return where.build(lambda: PoolsSpec(pd, number(raw, "kv_link_gb_per_s", where, DEFAULT_KV_LINK_GB_PER_S, lo=0,
                                                    strict_lo=True),
                                         number(raw, "kv_latency_ms", where, 0.0, lo=0)))


def parse_kv_cache(raw: object, where: Where) -> KvCacheSpec:
    """serving.kv_cache: block_tokens, offload_gb, host_gb_per_s (scenario/kv_cache.py)."""
    raw = mapping(raw, where, "block_tokens, offload_gb, host_gb_per_s")
    only(raw, where, {"block_tokens", "offload_gb", "host_gb_per_s"})
    block = number(raw, "block_tokens", where, lo=1, integer=True) if "block_tokens" in raw else None
    bw = number(raw, "host_gb_per_s", where, lo=0, strict_lo=True) if "host_gb_per_s" in raw else None
    offload = number(raw, "offload_gb", where, 0.0, lo=0)
    if bw is not None and offload == 0:
        raise where.error("field 'host_gb_per_s' prices reloads from a host tier: give 'offload_gb' (--kv-offload) "
                          "too", "host_gb_per_s")
    return KvCacheSpec(block, offload, bw)


def parse_sessions(raw: object, where: Where) -> SessionShape:
    """traffic.sessions: turns, turn_input (tokens), think_s (scenario/traffic.py `SessionShape`)."""
    raw = mapping(raw, where, "turns, turn_input, think_s | profile")
    only(raw, where, {"turns", "turn_input", "think_s", "profile"})
    if "profile" in raw:
        drawn = [k for k in ("turns", "turn_input", "think_s") if k in raw]
        if drawn:
            raise where.error(f"field '{drawn[0]}': the agent profile draws it; give one or the other", drawn[0])
        name = raw["profile"]
        return where.build(lambda: SessionShape(1, 0, 0.0, str(name)), "profile")
    if "turns" not in raw:
        raise where.error("missing field 'turns' (turns per session)")
    return SessionShape(number(raw, "turns", where, lo=1, integer=True),
                        number(raw, "turn_input", where, 512, lo=0, integer=True),
                        number(raw, "think_s", where, 0.0, lo=0))


@dataclass(frozen=True)
class TrafficSpec:
    traffic: Traffic
    acceptance: AcceptanceMix | None  # every workload's rates given; None: they depend on the draft
    seed: int
    workloads: tuple[Workload, ...] = ()


def parse_traffic(raw: object, where: Where, base_dir: Path) -> TrafficSpec:
    raw = mapping(raw, where, "arrivals, num_requests | duration_s, prompt, output, workloads, seed")
    only(raw, where, {"arrivals", "num_requests", "duration_s", "prompt", "output", "workloads", "seed",
                       "cached_fraction", "sessions"})
    if "arrivals" not in raw:
        raise where.error("missing field 'arrivals'")
    arrivals = parse_arrivals(raw["arrivals"], where.at("arrivals"), base_dir)
    trace = arrivals.trace if isinstance(arrivals, TraceArrivals) else None
    prompt = output = None
    sessions_raw = raw.get("sessions")
    profiled = isinstance(sessions_raw, dict) and "profile" in sessions_raw
    for key in ("prompt", "output"):
        if key in raw:
            dist = parse_lengths(raw[key], where.at(key), base_dir, trace)
            prompt, output = (dist, output) if key == "prompt" else (prompt, dist)
        elif trace is None and not profiled:
            raise where.error(f"missing field '{key}' (a length distribution; only a replayed trace has its own)")
    n = number(raw, "num_requests", where, lo=1, integer=True) if "num_requests" in raw else None
    if n is not None and n > MAX_REQUESTS:
        raise where.error(f"field 'num_requests' must be at most {MAX_REQUESTS:,}, got {n:,}", "num_requests")
    duration = number(raw, "duration_s", where, lo=0, strict_lo=True) if "duration_s" in raw else None
    if n is not None and duration is not None:
        raise where.error("give one of 'num_requests' and 'duration_s', not both", "duration_s")
    if n is None and duration is None and trace is None:
        raise where.error("missing field 'num_requests' (or 'duration_s')")
    workloads = parse_workloads(raw["workloads"], where.at("workloads")) if "workloads" in raw else ()
    given = [w.resolved() for w in workloads]
    mix = AcceptanceMix(tuple(c for c in given if c is not None)) if given and None not in given else None
    seed = number(raw, "seed", where, 0, lo=0, integer=True)
    if seed >= 2**63:
        raise where.error(f"field 'seed' must be below 2^63, got {seed}", "seed")
    clients = parse_concurrency(raw["arrivals"], where.at("arrivals"))
    cached = number(raw, "cached_fraction", where, 0.0, lo=0)
    if cached > 1:
        raise where.error(f"field 'cached_fraction' must be in [0, 1], got {cached:g}", "cached_fraction")
    sessions = parse_sessions(raw["sessions"], where.at("sessions")) if "sessions" in raw else None
    traffic = where.build(lambda: Traffic(arrivals, prompt, output, n, duration, clients, cached, sessions))
    expected = traffic.mean_rate_rps * duration if duration is not None else 0.0
    if expected > MAX_REQUESTS:
        raise where.error(f"field 'duration_s': {duration:g} s at {traffic.mean_rate_rps:g} requests/s is about "
                          f"{expected:,.0f} requests; at most {MAX_REQUESTS:,} per run", "duration_s")
    return TrafficSpec(traffic, mix, seed, workloads)


@dataclass(frozen=True)
class SimulationSpec:
    traffic: TrafficSpec
    serving: ServingSpec


def load_simulation(path: str | Path, data: Mapping[str, Any] | None = None) -> SimulationSpec:
    """The traffic and serving sections of a scenario file (data: the already-parsed mapping, if any)."""
    p = Path(path)
    parsed, text = read_yaml_mapping(p)
    data = parsed if data is None else data
    lines = yaml_lines(text)
    root = Where(p.name, "", lines)
    if "traffic" not in data:
        raise root.error("missing section 'traffic'")
    return SimulationSpec(parse_traffic(data["traffic"], root.at("traffic"), p.parent),
                          parse_serving(data.get("serving"), root.at("serving")))


def parse_sections(data: Mapping[str, Any], file: str, lines: Mapping[str, int] | None, base_dir: Path
                   ) -> tuple[TrafficSpec | None, ServingSpec | None]:
    """A scenario's `traffic:` and `serving:` sections (None where absent); errors name `file`, the line
    (from `lines`, see `yaml_lines`) and the field; paths are relative to `base_dir`."""
    root = Where(file, "", lines)
    traffic = parse_traffic(data["traffic"], root.at("traffic"), base_dir) if "traffic" in data else None
    serving = parse_serving(data["serving"], root.at("serving")) if "serving" in data else None
    return traffic, serving

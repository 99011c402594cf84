"""Scenario files: target, hardware, drafts, load and objective, validated on load.

Every error names the file, the field and the allowed values (README, "Scenario files"); errors in the
`traffic:` and `serving:` sections (the serving simulation's, parsed by `simulate.config`) name the line too.
A scenario with `traffic:` and no `load:` is planned at a load derived from it (`arrival_from_traffic`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specsim.acceptance.metrics import load_acceptance
from specsim.cost.dtypes import KV_BYTES, check_precision
from specsim.cost.hardware import load_hardware
from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.layout import Layout, Placed, check_layout, make_layout
from specsim.cost.model import ModelSpec, catalogue_dir, load_model, resolve_name
from specsim.drafts.build import make_draft
from specsim.drafts.draft import Draft
from specsim.engines.profile import EngineProfile, load_engine
from specsim.errors import SpecsimError
from specsim.fields import FIELDS, MAX_TOKENS, unknown_names
from specsim.files import is_file, read_yaml_mapping
from specsim.scenario.deployment import apply_to_mapping
from specsim.scenario.sections import ServingSpec, TrafficSpec, parse_sections
from specsim.scenario.traffic import TraceArrivals
from specsim.scenario.where import Where, yaml_lines
from specsim.step.evaluate import DEFAULT_ENGINE, StepCalibration, bundled_engine

OBJECTIVES = ("throughput", "latency", "slo")
MAX_CONTEXT = MAX_TOKENS  # tokens; a bound on input, not on what fits (the planner checks memory)
HOURS_PER_DAY = 24.0
#: a scenario's own keys (the plan's question and its sections); the rest are fields (specsim/fields.py)
SCENARIO_ONLY = {"name", "description", "objective", "slo_ms_per_token", "max_k", "drafts", "load", "gpu_hour_usd",
                 "notes", "traffic", "serving"}
TOP_KEYS = SCENARIO_ONLY | {f.scenario for f in FIELDS.values() if f.scenario and "." not in f.scenario}


@dataclass(frozen=True)
class Bucket:
    """A share of the day at one batch size, with a context-length distribution."""

    name: str
    weight: float  # share of the day (normalised)
    batch: int
    contexts: tuple[tuple[int, float], ...]  # (context length, share), shares sum to 1


@dataclass(frozen=True)
class ArrivalLoad:
    """Requests arriving at a rate, each with a prompt and an output; concurrency by Little's law."""

    rate_rps: float
    prompt_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class Scenario(Placed):
    name: str
    description: str
    hardware: HardwareProfile
    model: ModelSpec
    tp: int
    weight_dtype: str
    kv_dtype: str
    objective: str
    slo_ms_per_token: float | None
    max_k: int
    memory_utilization: float
    drafts: tuple[Draft, ...]
    buckets: tuple[Bucket, ...] = ()
    arrival: ArrivalLoad | None = None
    gpu_hour_usd: float | None = None
    path: str = ""
    raw: dict[str, Any] = field(default_factory=dict, compare=False)
    engine: EngineProfile = field(default_factory=bundled_engine)  # the serving engine (vLLM unless said)
    layout: Layout | None = None  # DP attention, EP, pipeline, context parallelism beside tp (None: tp alone)
    traffic: TrafficSpec | None = field(default=None, compare=False)  # `traffic:` (specsim simulate)
    serving: ServingSpec | None = field(default=None, compare=False)  # `serving:` (specsim simulate)
    calibration: StepCalibration | None = None  # a fitted deployment's (scenario/deployment.py)


def _num(data: dict[str, Any], key: str, where: str, default: float | None = None, lo: float | None = None,
         hi: float | None = None, integer: bool = False) -> float | None:
    """Field `key` as a finite number in [lo, hi] (an int if `integer`), `default` if absent; None only where
    absent without a default."""
    value = data.get(key, default)
    if value is None:
        if default is None and key in data:
            raise SpecsimError(f"{where}: field '{key}' is empty")
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecsimError(f"{where}: field '{key}' must be a number, got {value!r}")
    if not math.isfinite(value):
        raise SpecsimError(f"{where}: field '{key}' must be a finite number, got {value!r}")
    if integer and int(value) != value:
        raise SpecsimError(f"{where}: field '{key}' must be an integer, got {value!r}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        rng = f"[{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]"
        raise SpecsimError(f"{where}: field '{key}' must be in {rng}, got {value!r}")
    return int(value) if integer else float(value)


def _real(data: dict[str, Any], key: str, where: str, default: float | None = None, lo: float | None = None,
          hi: float | None = None) -> float:
    """`_num` of a field that has a default or is known to be there."""
    value = _num(data, key, where, default, lo, hi)
    assert value is not None, key
    return value


def _int(data: dict[str, Any], key: str, where: str, default: int | None = None, lo: float | None = None,
         hi: float | None = None) -> int:
    """`_num` of an integer field that has a default or is known to be there."""
    value = _num(data, key, where, default, lo, hi, integer=True)
    assert value is not None, key
    return int(value)


def _tokens(value: Any, where: str) -> int:
    """A context in tokens as the field `context` reads one (2k = 2,000; 2K = 2,048), within its bounds."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise SpecsimError(f"{where}: 'context' must be a token count or a mapping {{tokens: share}}, got {value!r}")
    return int(FIELDS["context"].parse(value, f"{where}: context"))


def _contexts(value: Any, where: str) -> tuple[tuple[int, float], ...]:
    if not isinstance(value, dict):
        return ((_tokens(value, where), 1.0),)
    if value:
        items = []
        for key, share in value.items():
            ctx = _tokens(key, where)
            if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share <= 1:
                raise SpecsimError(f"{where}: context {key}: share must be a number in (0, 1], got {share!r}")
            items.append((ctx, float(share)))
        total = sum(s for _, s in items)
        if abs(total - 1.0) > 1e-6:
            raise SpecsimError(f"{where}: context shares must sum to 1, got {total:g} "
                               f"({', '.join(f'{c}: {s:g}' for c, s in items)})")
        return tuple((c, s / total) for c, s in items)
    raise SpecsimError(f"{where}: 'context' must be a token count or a mapping {{tokens: share}}, got {{}}")


def _load(raw: Any, where: str) -> tuple[tuple[Bucket, ...], ArrivalLoad | None]:
    if not isinstance(raw, dict):
        raise SpecsimError(f"{where}: field 'load' must be a mapping with 'buckets' or 'arrival_rate_rps'")
    if "buckets" in raw and "arrival_rate_rps" in raw:
        raise SpecsimError(f"{where}: load: give either 'buckets' or 'arrival_rate_rps', not both")
    if "arrival_rate_rps" in raw:
        w = f"{where}: load"
        bad = unknown_names(sorted(map(str, raw)), ("arrival_rate_rps", "prompt_tokens", "output_tokens"), "field")
        if bad is not None:
            raise SpecsimError(f"{w}: {bad}")
        return (), ArrivalLoad(_real(raw, "arrival_rate_rps", w, lo=1e-9),
                               _int(raw, "prompt_tokens", w, 1024, lo=1),
                               _int(raw, "output_tokens", w, 256, lo=1))
    bad = unknown_names(sorted(map(str, raw)), ("buckets",), "field")
    if bad is not None:
        raise SpecsimError(f"{where}: load: {bad}")
    buckets_raw = raw.get("buckets")
    if not isinstance(buckets_raw, list) or not buckets_raw:
        raise SpecsimError(f"{where}: load.buckets must be a non-empty list")
    buckets = []
    for i, b in enumerate(buckets_raw):
        w = f"{where}: load.buckets[{i}]"
        if not isinstance(b, dict):
            raise SpecsimError(f"{w}: expected a mapping with batch, context, hours")
        bad = unknown_names(sorted(map(str, b)), ("name", "batch", "context", "hours", "weight"), "field")
        if bad is not None:
            raise SpecsimError(f"{w}: {bad}")
        if "batch" not in b:
            raise SpecsimError(f"{w}: missing field 'batch'")
        if "hours" in b and "weight" in b:
            raise SpecsimError(f"{w}: give 'hours' (of the day) or 'weight' (a share), not both")
        weight = _real(b, "hours", w, None, lo=0, hi=HOURS_PER_DAY) if "hours" in b else _real(b, "weight", w, 1.0,
                                                                                                lo=0)
        buckets.append(Bucket(str(b.get("name", f"bucket{i}")), weight,
                              _int(b, "batch", w, lo=1, hi=1_000_000),
                              _contexts(b.get("context", 2048), w)))
    return _day_shares(buckets_raw, buckets, where), None


def _day_shares(raw: list[Any], buckets: list[Bucket], where: str) -> tuple[Bucket, ...]:
    """The buckets' shares of the day: hours that sum to 24, or weights (normalised); never a mix of the two."""
    hours = ["hours" in b for b in raw]
    total = sum(b.weight for b in buckets)
    if any(hours) and not all(hours):
        raise SpecsimError(f"{where}: load.buckets: give every bucket 'hours' of the day or every bucket a "
                           "'weight', not a mix")
    if all(hours) and abs(total - HOURS_PER_DAY) > 1e-6:
        raise SpecsimError(f"{where}: load.buckets: hours must sum to 24, got {total:g} "
                           f"({' + '.join(f'{b.weight:g}' for b in buckets)}); or give each a 'weight' (a share)")
    if total <= 0:
        raise SpecsimError(f"{where}: load.buckets: weights sum to zero")
    return tuple(Bucket(b.name, b.weight / total, b.batch, b.contexts) for b in buckets)


def _relative(value: Any, base: Path) -> str:
    """A path written in a scenario is relative to the scenario's folder; a bare name (a bundled
    profile or catalogue model) is left as it is."""
    text = str(value)
    looks_like_path = "/" in text or "\\" in text or text.endswith((".yaml", ".yml", ".json"))
    if looks_like_path and not Path(text).is_absolute():
        return str(base / text)
    return text


def _model_ref(value: Any, base: Path) -> str:
    """A scenario's `model:`: a catalogue name, a Hugging Face id (org/name, as `-m` takes), or a path to
    a config.json (or its folder) relative to the scenario. A Hugging Face id that the catalogue knows
    is read as that id unless a file or folder of that name exists beside the scenario."""
    text = str(value)
    rel = _relative(text, base)
    if rel != text and not is_file(rel) and not is_file(Path(rel) / "config.json") and is_file(
            catalogue_dir() / f"{resolve_name(text)}.json"):
        return text
    return rel


def _read_acceptance_file(spec: Any, base: Path, where: str) -> Any:
    """A draft mapping whose acceptance is {file: PATH[, k: K]} with that file read (relative to the
    scenario) into an AcceptanceProfile; anything else unchanged."""
    if (isinstance(spec, dict) and isinstance(spec.get("acceptance"), dict)
            and {"before", "after"} <= set(spec["acceptance"])):
        return {**spec, "acceptance": _read_acceptance_window(spec["acceptance"], base, where)}
    if not isinstance(spec, dict) or not isinstance(spec.get("acceptance"), dict) or "file" not in spec["acceptance"]:
        return spec
    acc = spec["acceptance"]
    unknown = set(acc) - {"file", "k"}
    if unknown:
        raise SpecsimError(f"{where}.acceptance: unknown field(s) {sorted(map(str, unknown))} with 'file' "
                           "(allowed: file, k)")
    k = acc.get("k")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise SpecsimError(f"{where}.acceptance.k must be an integer >= 1, got {k!r}")
    file = Path(str(acc["file"]))  # always a path (unlike hardware/model, never a bundled name)
    return {**spec, "acceptance": load_acceptance(file if file.is_absolute() else base / file, k)}


def _read_acceptance_window(acc: dict[str, Any], base: Path, where: str) -> Any:
    """{before: SCRAPE, after: SCRAPE[, k: K]}: acceptance over the window between two /metrics scrapes
    (acceptance.metrics.read_metrics_window), paths relative to the scenario."""
    from specsim.acceptance.metrics import load_metrics_window

    unknown = set(acc) - {"before", "after", "k"}
    if unknown:
        raise SpecsimError(f"{where}.acceptance: unknown field(s) {sorted(map(str, unknown))} with 'before'/'after' "
                           "(allowed: before, after, k)")
    k = acc.get("k")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise SpecsimError(f"{where}.acceptance.k must be an integer >= 1, got {k!r}")
    paths = [Path(str(acc[key])) for key in ("before", "after")]
    before, after = (p if p.is_absolute() else base / p for p in paths)
    try:
        return load_metrics_window(before, after).profile(k)
    except SpecsimError as exc:
        raise SpecsimError(f"{where}.acceptance: {exc}") from None


def load_from_traffic(traffic: TrafficSpec) -> tuple[tuple[Bucket, ...], ArrivalLoad | None]:
    """The analytic planner's load for a `traffic:` section: closed-loop clients sending as fast as they may
    keep `concurrency` sequences running (one bucket at that batch, context = mean prompt + half the mean output);
    any other traffic its mean arrival rate (`arrival_from_traffic`)."""
    t = traffic.traffic
    if t.concurrency is not None and not math.isfinite(t.mean_rate_rps):
        prompt = t.prompt.mean_tokens if t.prompt is not None else 1.0
        output = t.output.mean_tokens if t.output is not None else 1.0
        context = max(1, round(prompt + output / 2.0))
        return (Bucket(f"concurrency {t.concurrency}", 1.0, int(t.concurrency), ((context, 1.0),)),), None
    return (), arrival_from_traffic(traffic)


def arrival_from_traffic(traffic: TrafficSpec) -> ArrivalLoad:
    """The analytic planner's load for a `traffic:` section: its mean arrival rate (a rate curve's daily
    mean, a trace's rate x speedup) and its mean prompt and output lengths (a replayed trace's own)."""
    t = traffic.traffic
    arr = t.arrivals
    trace = arr.trace if isinstance(arr, TraceArrivals) else None
    prompt = t.prompt.mean_tokens if t.prompt is not None else float(trace.prompt_tokens.mean()) if trace else 1.0
    output = t.output.mean_tokens if t.output is not None else float(trace.output_tokens.mean()) if trace else 1.0
    rate = t.mean_rate_rps
    if not math.isfinite(rate) or rate <= 0:
        raise SpecsimError("traffic: no arrival rate to plan for (a trace of one request)")
    return ArrivalLoad(float(rate), max(1, round(prompt)), max(1, round(output)))


def parse_scenario(data: dict[str, Any], where: str, lines: dict[str, int] | None = None) -> Scenario:
    """A Scenario from a parsed file; `lines` (dotted path -> line, `simulate.config.yaml_lines`) lets errors
    in the traffic / serving sections name their line. Fields are checked in a fixed order: a file with several
    errors is told the first."""
    _check_fields(data, where)
    base = Path(where).parent
    data, calibration = apply_to_mapping(data, where, base)
    try:
        hw = load_hardware(_relative(data["hardware"], base))
        if data.get("cost_model") is not None:  # the field --cost-model overrides (specsim/fields.py)
            hw = hw.with_cost_model(str(data["cost_model"]))
        model = load_model(_model_ref(data["model"], base))
    except SpecsimError as exc:
        raise SpecsimError(f"{where}: {exc}") from None
    objective, slo, traffic, serving = _objective(data, where, lines)
    wd, kd = _dtypes(data, where)
    drafts = _drafts(data, where, base, model)
    labels = [d.label for d in drafts]
    if serving is not None and serving.draft is not None and serving.draft not in labels:
        raise Where(where, "serving", lines).error(f"field 'draft' must be one of the scenario's drafts "
                                                   f"({', '.join(labels)}), got {serving.draft!r}", "draft")
    if "load" in data:
        buckets, arrival = _load(data["load"], where)
    else:
        assert traffic is not None
        try:
            buckets, arrival = load_from_traffic(traffic)
        except SpecsimError as exc:
            raise SpecsimError(f"{where}: {exc}") from None
    _check_window(model, buckets, arrival, traffic, where)
    tp = _int(data, "tp", where, 1, lo=1, hi=64)
    model.check_tp(tp, f"{where}: field 'tp'")
    layout = _layout(data, where, tp, model.n_experts)
    try:
        engine = load_engine(_relative(data.get("engine") or DEFAULT_ENGINE, base))
    except SpecsimError as exc:
        raise SpecsimError(f"{where}: field 'engine': {exc}") from None
    return Scenario(
        name=str(data.get("name") or Path(where).stem), description=str(data.get("description", "")).strip(),
        hardware=hw, model=model, tp=tp,
        weight_dtype=wd, kv_dtype=kd, objective=objective, slo_ms_per_token=slo,
        max_k=_int(data, "max_k", where, 8, lo=0, hi=32),
        memory_utilization=_real(data, "memory_utilization", where, 0.9, lo=0.05, hi=1.0),
        drafts=drafts, buckets=buckets, arrival=arrival,
        gpu_hour_usd=_num(data, "gpu_hour_usd", where, None, lo=0), path=where, raw=data, engine=engine,
        traffic=traffic, serving=serving, layout=layout, calibration=calibration,
    )


def _check_window(model: ModelSpec, buckets: tuple[Bucket, ...], arrival: ArrivalLoad | None,
                  traffic: TrafficSpec | None, where: str) -> None:
    """Every context the scenario asks within the model's window (as vLLM refuses a request longer than
    max_model_len): the buckets' contexts, an arrival load's prompt + output, the traffic's mean prompt + output."""
    try:
        t = traffic.traffic if traffic is not None else None
        if t is not None and t.prompt is not None and t.output is not None:
            model.check_context(t.prompt.mean_tokens + t.output.mean_tokens, "prompt + output (mean)")
        if arrival is not None:
            model.check_context(arrival.prompt_tokens + arrival.output_tokens, "load: prompt + output")
        for b in buckets:
            model.check_context(max(c for c, _ in b.contexts), f"bucket {b.name!r}: context")
    except SpecsimError as exc:
        raise SpecsimError(f"{where}: {exc}") from None


def _layout(data: dict[str, Any], where: str, tp: int, n_experts: int) -> Layout | None:
    """The fields dp, ep, pp, cp (whole numbers) and layer_split (true / false) as a layout; None for tp alone."""
    dp, ep, pp, cp = (_int(data, key, where, 1, lo=1, hi=1024) for key in ("dp", "ep", "pp", "cp"))
    split = data.get("layer_split", False)
    if not isinstance(split, bool):
        raise SpecsimError(f"{where}: field 'layer_split' must be true or false, got {split!r}")
    try:
        layout = make_layout(tp, dp, ep, pp, cp, layer_split=split, flag="")
        check_layout(layout, n_experts, "")
    except SpecsimError as exc:
        raise SpecsimError(f"{where}: {exc}") from None
    return None if layout.simple else layout


def _check_fields(data: dict[str, Any], where: str) -> None:
    """Only known top-level fields; hardware and model present as names or paths; a load or a traffic section."""
    bad = unknown_names(sorted(map(str, data)), TOP_KEYS, "field")
    if bad is not None:
        raise SpecsimError(f"{where}: {bad}")
    for key in ("hardware", "model"):
        if key not in data:
            raise SpecsimError(f"{where}: missing field '{key}'")
        if not isinstance(data[key], str) or not data[key].strip() or len(data[key]) > 4096:
            raise SpecsimError(f"{where}: field '{key}' must be a name or a path, got {str(data[key])[:60]!r}")
    if "load" not in data and "traffic" not in data:
        raise SpecsimError(f"{where}: missing field 'load' (or a 'traffic' section to derive it from)")


def _objective(data: dict[str, Any], where: str, lines: dict[str, int] | None
               ) -> tuple[str, float | None, TrafficSpec | None, ServingSpec | None]:
    """The objective and its per-token bound (`slo_ms_per_token`, else the serving section's TPOT bound), with
    the traffic and serving sections they are read beside."""
    objective = str(data.get("objective", "throughput"))
    if objective not in OBJECTIVES:
        raise SpecsimError(f"{where}: field 'objective' must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    slo = _num(data, "slo_ms_per_token", where, None, lo=1e-6)
    traffic, serving = parse_sections(data, where, lines, Path(where).parent)
    if slo is None and serving is not None and serving.slo is not None:
        slo = serving.slo.tpot_s * 1e3  # the analytic plan's per-token bound: the TPOT bound
    if objective == "slo" and slo is None:
        raise SpecsimError(f"{where}: objective 'slo' needs field 'slo_ms_per_token' (or serving.slo)")
    return objective, slo, traffic, serving


def _dtypes(data: dict[str, Any], where: str) -> tuple[str, str]:
    """The weights' and the KV cache's dtypes (the checkpoint's own weights and a bf16 cache unless said)."""
    wd = str(data.get("weight_dtype", FIELDS["weight_dtype"].default))
    kd = str(data.get("kv_dtype", FIELDS["kv_dtype"].default))
    try:
        wd = check_precision(wd)
    except SpecsimError as exc:
        raise SpecsimError(f"{where}: field 'weight_dtype': {exc}") from None
    if kd not in KV_BYTES:
        raise SpecsimError(f"{where}: field 'kv_dtype' must be one of {', '.join(KV_BYTES)}, got {kd!r}")
    return wd, kd


def _drafts(data: dict[str, Any], where: str, base: Path, model: ModelSpec) -> tuple[Draft, ...]:
    """The drafts, each with its acceptance (a file's read relative to the scenario, else the priors for the
    scenario's task and temperature), under distinct names."""
    drafts_raw = data.get("drafts", [])
    if not isinstance(drafts_raw, list) or not drafts_raw:
        raise SpecsimError(f"{where}: field 'drafts' must be a non-empty list of draft methods")
    task = data.get("task")
    temperature = _num(data, "temperature", where, None, lo=0, hi=2)
    drafts_list = []
    for i, d in enumerate(drafts_raw):
        try:
            drafts_list.append(make_draft(_read_acceptance_file(d, base, f"drafts[{i}]"), model, f"drafts[{i}]",
                                          None if task is None else str(task), temperature))
        except SpecsimError as exc:
            raise SpecsimError(f"{where}: {exc}") from None
        except (TypeError, ValueError, AttributeError) as exc:
            raise SpecsimError(f"{where}: drafts[{i}]: malformed draft {d!r} ({exc})") from None
    labels = [d.label for d in drafts_list]
    if dup := sorted({x for x in labels if labels.count(x) > 1}):
        raise SpecsimError(f"{where}: drafts: more than one draft named {dup[0]!r}; give each a distinct 'name'")
    return tuple(drafts_list)


def load_scenario(path: str | Path) -> Scenario:
    data, text = read_yaml_mapping(path)
    lines = yaml_lines(text) if "traffic" in data or "serving" in data else None
    try:
        return parse_scenario(data, str(path), lines)
    except SpecsimError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError) as exc:  # a field of an unexpected type: bad input
        raise SpecsimError(f"{path}: malformed scenario ({type(exc).__name__}: {exc})") from None

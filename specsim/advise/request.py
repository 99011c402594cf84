"""What `evaluate` was asked, from its flags or a grid row (`specsim.fields.Given`), as one `EvaluateRequest`:
every check of the question's shape lives here, so that a flag and a grid column are refused for the same reason
in the same words, and an input that would change nothing is refused rather than ignored.

Two cost routes: the seed chapter's abstract ratio (--draft-cost-ratio) and a real target (--hardware, --model,
--draft). A field that prices only one of them is refused on the other; the acceptance is one of a measured
length, a rate, per-position rates or a metrics file, or else the draft's sourced prior, which alone reads the
prior's keys (task, temperature, checkpoint).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from specsim.advise.evaluate import Acceptance, AdaptiveStop, EvaluateRequest, RatioCost, RealCost
from specsim.cost.dtypes import KV_BYTES, check_precision
from specsim.cost.layout import make_layout
from specsim.errors import SpecsimError
from specsim.fields import Given
from specsim.step.evaluate import StepCalibration

#: fields that describe a real target, its engine or its draft: refused with --draft-cost-ratio
REAL_ONLY = ("hardware", "model", "draft", "weight_dtype", "kv_dtype", "memory_utilization", "tp", "dp", "ep", "pp",
             "cp", "layer_split", "engine", "cost_model", "topk", "num_draft_tokens", "draft_tp", "window", "guesses",
             "adaptive_stop", "task", "temperature", "checkpoint")
RATIO_ONLY = ("target_step_ms", "ridge_tokens")
GIVEN_ACCEPTANCE = ("acceptance_length", "alpha", "alphas", "acceptance")
PRIOR_KEYS = ("task", "temperature", "checkpoint")


def floats(text: str, spelt: str) -> tuple[float, ...]:
    """A comma-separated list of finite numbers (`0.9,0.5,0.2`)."""
    parts = [p.strip() for p in str(text).split(",")]
    try:
        values = tuple(float(p) for p in parts)
    except ValueError:
        raise SpecsimError(f"{spelt}: expected comma-separated numbers, got {text!r}") from None
    if not values or not all(math.isfinite(v) for v in values):
        raise SpecsimError(f"{spelt}: expected comma-separated finite numbers, got {text!r}")
    return values


def _list(g: Given, name: str) -> tuple[float, ...] | None:
    return floats(g[name], g.spell(name)) if g.given(name) else None


def _cost(g: Given, base: Path | None) -> RatioCost | RealCost:
    """The cost route the question names (module docstring)."""
    real = [n for n in ("hardware", "model", "draft") if g.given(n)]
    if g.given("draft_cost_ratio"):
        if real:
            raise SpecsimError("give either --draft-cost-ratio or --hardware/--model/--draft, not both")
        g.refuse(REAL_ONLY, "prices a real target: give it with --hardware/--model/--draft, not --draft-cost-ratio")
        return RatioCost(g["draft_cost_ratio"], g["target_step_ms"] if g.given("target_step_ms") else 1.0,
                         g["ridge_tokens"])
    g.refuse(RATIO_ONLY, "applies to --draft-cost-ratio only")
    if not real:
        raise SpecsimError("give a cost source: --draft-cost-ratio C, or --hardware H --model M --draft D")
    missing = [g.spell(n) for n in ("hardware", "model", "draft") if n not in real]
    if missing:
        raise SpecsimError(f"the cost-model route needs all of --hardware, --model and --draft (missing "
                           f"{', '.join(missing)})")
    _formats(g)
    layout = make_layout(g["tp"], g["dp"], g["ep"], g["pp"], g["cp"], g["layer_split"])
    engine = str(g["engine"])
    return RealCost(g["hardware"], g["model"], g["draft"], g["tp"], g["draft_tp"], g["weight_dtype"], g["kv_dtype"],
                    g["topk"], g["num_draft_tokens"], str(_path(engine, base)) if _looks_like_path(engine) else engine,
                    g["cost_model"], None if layout.simple else layout, window=g["window"], guesses=g["guesses"],
                    task=g["task"], temperature=g["temperature"], checkpoint=g["checkpoint"],
                    memory_utilization=g["memory_utilization"], calibration=_calibration(g))


def _calibration(g: Given) -> StepCalibration | None:
    """A fitted deployment's calibration for the draft asked (scenario/deployment.py)."""
    if not g.given("deployment"):
        return None
    from specsim.scenario.deployment import load_deployment

    return load_deployment(g["deployment"]).calibration_for(str(g["draft"]))


def _formats(g: Given) -> None:
    """The weights' and the KV cache's formats, named as the user spelt them when wrong."""
    try:
        check_precision(str(g["weight_dtype"]))
    except SpecsimError as exc:
        raise SpecsimError(f"{g.spell('weight_dtype')}: {exc}") from None
    if g["kv_dtype"] not in KV_BYTES:
        raise SpecsimError(f"{g.spell('kv_dtype')} must be one of {' | '.join(KV_BYTES)}, got {g['kv_dtype']!r}")


def _acceptance(g: Given, base: Path | None) -> Acceptance:
    """At most one given acceptance; the prior's keys only where the prior is read."""
    given = [n for n in GIVEN_ACCEPTANCE if g.given(n)]
    if len(given) > 1:
        raise SpecsimError(f"give one acceptance: {' or '.join(g.spell(n) for n in given)}, not both")
    if given:
        g.refuse(PRIOR_KEYS, f"selects the acceptance prior, which {g.spell(given[0])} replaces")
    rates = _list(g, "alphas")
    file = _path(g["acceptance"], base) if g.given("acceptance") else None
    return Acceptance(g["alpha"], (lambda: rates) if rates is not None else None, file, g["acceptance_length"])


def _adaptive(g: Given) -> AdaptiveStop | None:
    if not g.given("adaptive_stop"):
        g.refuse(("adaptive_convention",), "applies with --adaptive-stop only")
        return None
    convention = str(g["adaptive_convention"])
    if convention not in ("inclusive", "exclusive"):
        raise SpecsimError(f"{g.spell('adaptive_convention')} must be inclusive or exclusive, got {convention!r}")
    stop = floats(g["adaptive_stop"], g.spell("adaptive_stop"))
    if len(stop) != 2 or not all(0.0 <= x <= 1.0 for x in stop):
        raise SpecsimError(f"{g.spell('adaptive_stop')} needs RECALL,FALSE_ALARM, two rates in [0, 1], "
                           f"got {g['adaptive_stop']!r}")
    return AdaptiveStop(stop[0], stop[1], convention)


def _shape(g: Given) -> None:
    """A chain (--k) or a tree file, and what applies to each."""
    if g.given("tree"):
        g.refuse(("k", "topk", "num_draft_tokens"), "is set by the --tree file's shape: give one or the other")
        g.refuse(("acceptance_length",), "is a chain's measure: a --tree's acceptance is its own table or "
                                         "--sibling-probs")
    else:
        g.refuse(("sibling_probs",), "applies to --tree only")
    if g.given("num_draft_tokens") and not (g.given("topk") and int(g["topk"]) > 1):
        raise SpecsimError(f"{g.spell('num_draft_tokens')} sizes a tree: give it with --topk > 1")


def evaluate_request(g: Given, base: Path | None = None) -> EvaluateRequest:
    """The request `g` asks (module docstring); `base` is the folder relative paths are read from (a grid's)."""
    cost = _cost(g, base)
    _shape(g)
    acceptance = _acceptance(g, base)
    adaptive = _adaptive(g)
    siblings = _list(g, "sibling_probs")
    tree = _path(g["tree"], base) if g.given("tree") else None
    return EvaluateRequest(cost, acceptance, g["k"], tree, (lambda: siblings) if siblings is not None else None,
                           int(g["batch"]), int(g["context"]), float(g["extra_overhead_ms"] or 0.0), adaptive)


def _looks_like_path(text: str) -> bool:
    return "/" in text or "\\" in text or text.endswith((".yaml", ".yml", ".json"))


def _path(value: str | Path, base: Path | None) -> Path:
    p = Path(value)
    return p if base is None or p.is_absolute() else base / p


def given_fields(g: Given) -> Sequence[str]:
    """The fields the user gave, in FIELDS' order (for the echo)."""
    return [n for n in g.values if g.given(n)]

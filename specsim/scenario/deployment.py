"""A fitted deployment (`specsim fit-runs`, advise/fit_runs.py): what a deployment's own benchmark runs say about
it, as a file every command takes (`--deployment FILE`, a scenario's `deployment:` field).

The file states, in the one vocabulary of specsim/fields.py:
- `question`: the deployment the runs measured (hardware, model, engine, layout, formats, draft and k, the
  client's lengths). At a door these fill every field the user did not give; a field that names the deployment
  (TARGET) given with another value asks about another deployment and is refused, since the calibration holds
  only where it was measured.
- `calibration`: the step's host cost beyond the engine profile's, the scale on the target's decode passes, and
  the speculative step's own host cost and verification scale (step/evaluate.py StepCalibration). The speculative
  step's host cost holds the measured draft's fixed costs: it applies to that draft only.
- `acceptance`: the conditional acceptance rate per position of the draft measured (from the engine's counters,
  or fitted to the runs), used wherever that draft is asked without an acceptance of its own.
- `uncertainty`: each parameter's standard deviation and `sigma_log`, the 1-sd error of a predicted serving
  figure in log terms, which the bands take in place of the engine's cost spread.
- `residuals`: each run's measured and fitted figures.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from specsim.errors import SpecsimError
from specsim.fields import FIELDS, Given
from specsim.files import parsed_once, read_mapping
from specsim.step.evaluate import StepCalibration

FORMAT = "specsim-deployment/1"
#: the fields that say which deployment it is
TARGET = ("hardware", "model", "engine", "tp", "dp", "ep", "weight_dtype", "kv_dtype")
#: every question field a deployment file states
QUESTION = (*TARGET, "draft", "k", "input_len", "output_len", "range_ratio", "client", "prompts", "max_num_seqs")
KEYS = ("format", "question", "arms", "calibration", "acceptance", "uncertainty", "residuals", "runs")


@dataclass(frozen=True)
class Deployment:
    """A fitted deployment (module docstring)."""

    question: Mapping[str, Any]
    calibration: StepCalibration
    alphas: tuple[float, ...] = ()
    acceptance_source: str = ""  # counters | fitted | '' (none: the draft's prior)
    sigma_log: float = 0.0
    parameters: Mapping[str, Mapping[str, float]] = dataclasses.field(default_factory=dict)
    residuals: tuple[Mapping[str, Any], ...] = ()
    runs: tuple[str, ...] = ()
    path: str = ""
    arms: tuple[str, ...] = ("off", "on")  # the arms the runs measured

    @property
    def draft(self) -> str:
        return str(self.question.get("draft") or "")

    def tokens_per_step(self, k: int | None = None) -> float | None:
        """Tokens per step of the measured draft at k (the runs' k by default) from its per-position rates
        (acceptance/chain.expected_tokens_positional); None where the file states no acceptance."""
        from specsim.acceptance.chain import expected_tokens_positional

        if not self.alphas:
            return None
        return float(expected_tokens_positional(self.alphas, k or int(self.question.get("k") or 1)))

    def calibration_for(self, draft: str | None) -> StepCalibration:
        """The calibration for a question about `draft`: the speculative step's own host cost (which holds the measured
        draft's fixed costs) only for the draft the runs measured; the fit's error for the bands only where the runs
        measured that draft speculating (else None: the engine's measured spreads, since the speculative step was
        not fitted)."""
        if "on" in self.arms and (draft is None or draft.strip().lower() == self.draft.lower()):
            return self.calibration
        return dataclasses.replace(self.calibration, spec_host_ms=0.0, sigma_log=None)

    def mapping(self) -> dict[str, Any]:
        """The file's content (module docstring)."""
        c = self.calibration
        return {"format": FORMAT, "question": dict(self.question), "arms": list(self.arms),
                "calibration": {"host_ms": c.host_ms, "pass_scale": c.pass_scale, "verify_scale": c.verify_scale,
                                "spec_host_ms": c.spec_host_ms},
                "acceptance": {"source": self.acceptance_source, "alphas": list(self.alphas)},
                "uncertainty": {"sigma_log": self.sigma_log, **{k: dict(v) for k, v in self.parameters.items()}},
                "residuals": [dict(r) for r in self.residuals], "runs": list(self.runs)}


def deployment_text(d: Deployment) -> str:
    """The file's YAML (files.write_outputs writes it whole or not at all)."""
    return yaml.safe_dump(_plain(d.mapping()), sort_keys=False, width=100)


def _plain(x: Any) -> Any:
    """numpy scalars and tuples as YAML's own types."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    if hasattr(x, "item"):
        return x.item()
    return x


def _number(data: Mapping[str, Any], key: str, where: str, lo: float, hi: float) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= float(value) <= hi:
        raise SpecsimError(f"{where}: '{key}' must be a number in [{lo:g}, {hi:g}], got {value!r}")
    return float(value)


def _parse(path: Path) -> Deployment:
    where = str(path)
    data = read_mapping(path, where)
    if data.get("format") != FORMAT:
        raise SpecsimError(f"{where}: not a deployment file (format: {FORMAT}, written by specsim fit-runs)")
    if bad := sorted(set(map(str, data)) - set(KEYS)):
        raise SpecsimError(f"{where}: unknown key {bad[0]!r} (a deployment file has {', '.join(KEYS)})")
    q = data.get("question")
    if not isinstance(q, dict) or not all(n in q for n in ("hardware", "model", "draft")):
        raise SpecsimError(f"{where}: 'question' must state at least hardware, model and draft")
    if bad := sorted(set(map(str, q)) - set(QUESTION)):
        raise SpecsimError(f"{where}: question: unknown field {bad[0]!r}")
    question = {n: FIELDS[n].parse(v, f"{where}: question.{n}") for n, v in q.items() if v is not None}
    cal = data.get("calibration") or {}
    acc = data.get("acceptance") or {}
    alphas = tuple(float(a) for a in acc.get("alphas") or ())
    if not all(0.0 <= a <= 1.0 for a in alphas):
        raise SpecsimError(f"{where}: acceptance.alphas must be rates in [0, 1]")
    unc = dict(data.get("uncertainty") or {})
    sigma = _number(unc, "sigma_log", f"{where}: uncertainty", 0.0, 10.0)
    if bad := sorted(set(map(str, cal)) - {"host_ms", "pass_scale", "verify_scale", "spec_host_ms"}):
        raise SpecsimError(f"{where}: calibration: unknown key {bad[0]!r}")
    at = f"{where}: calibration"
    calibration = StepCalibration(_number(cal, "host_ms", at, -1e3, 1e4), _number(cal, "pass_scale", at, 1e-3, 1e3),
                                  _number({"verify_scale": 1.0, **cal}, "verify_scale", at, 1e-3, 1e3),
                                  _number({"spec_host_ms": 0.0, **cal}, "spec_host_ms", at, -1e3, 1e4), sigma)
    return Deployment(question, calibration, alphas, str(acc.get("source") or ""), sigma,
                      {k: dict(v) for k, v in unc.items() if isinstance(v, dict)},
                      tuple(data.get("residuals") or ()), tuple(map(str, data.get("runs") or ())), where,
                      _arms(data.get("arms", ["off", "on"]), where))


def _arms(value: Any, where: str) -> tuple[str, ...]:
    arms = tuple(str(a) for a in value) if isinstance(value, list) else ()
    if not arms or not set(arms) <= {"off", "on"}:
        raise SpecsimError(f"{where}: 'arms' must list the arms measured (off, on), got {value!r}")
    return arms


_load = parsed_once(_parse)


def load_deployment(path: str | Path) -> Deployment:
    """A deployment file, checked; one line naming what is wrong."""
    return _load(Path(path))


#: why a deployment and another cost model are refused together, at every door
OTHER_COST_MODEL = ("prices the step another way than the deployment's calibration was fitted on (the hardware "
                    "profile's own cost model): drop one of them")


def resolve(ref: Any, base: Path) -> Path:
    """A scenario's `deployment:` path: as written where it names a file from here, else relative to the
    scenario's folder."""
    path = Path(str(ref))
    return path if path.is_absolute() or path.exists() else base / path


def _same(name: str, given: Any, fitted: Any) -> bool:
    """Whether a target field's value names the deployment's (a GPU, model or engine by any of its spellings)."""
    if str(given).strip().lower() == str(fitted).strip().lower():
        return True
    if name in ("hardware", "model", "engine"):
        from specsim.cost.hardware import load_hardware
        from specsim.cost.model import load_model
        from specsim.engines.profile import load_engine

        loader: Any = {"hardware": load_hardware, "model": load_model, "engine": load_engine}[name]
        try:
            return bool(loader(str(given)).name == loader(str(fitted)).name)
        except SpecsimError:
            return False
    return False


def check_target(d: Deployment, values: Mapping[str, Any], spell: Any) -> None:
    """SpecsimError where a field naming the deployment is given another value (module docstring)."""
    for name in TARGET:
        if name in values and name in d.question and not _same(name, values[name], d.question[name]):
            raise SpecsimError(f"{spell(name)} {values[name]} asks about another deployment: {d.path} was fitted on "
                               f"{name} {d.question[name]} (drop one of them)")


def fill(g: Given, door: str) -> Given:
    """The question at a door with its `deployment` field's values filling every field not given (module
    docstring); the draft's acceptance (`alphas`, evaluate's) where the draft is the one measured and no
    acceptance is given."""
    if not g.given("deployment"):
        return g
    d = load_deployment(g["deployment"])
    check_target(d, {n: g[n] for n in TARGET if g.given(n)}, g.spell)
    g.refuse(("cost_model",), OTHER_COST_MODEL)
    values, typed = dict(g.values), set(g.typed)
    for name, value in d.question.items():
        if door in FIELDS[name].doors and not g.given(name):
            values[name], typed = value, typed | {name}
    own_draft = str(values.get("draft", "")).lower() == d.draft.lower()
    acceptance = ("acceptance_length", "alpha", "alphas", "acceptance", "task", "temperature", "checkpoint")
    if door == "evaluate" and d.alphas and own_draft and not any(g.given(n) for n in acceptance):
        values["alphas"], typed = ",".join(f"{a:.6g}" for a in d.alphas), typed | {"alphas"}
    return dataclasses.replace(g, values=values, typed=frozenset(typed))


def apply_to_mapping(data: dict[str, Any], where: str, base: Path) -> tuple[dict[str, Any], StepCalibration | None]:
    """A scenario's mapping with its `deployment:` applied: the target's fields filled from the deployment (and
    checked against it), the acceptance of the measured draft where the scenario gives it none; and the
    calibration for the scenario's target (None without a deployment)."""
    ref = data.get("deployment")
    if ref is None:
        return data, None
    d = load_deployment(resolve(ref, base))
    check_target(d, data, lambda n: f"{where}: field '{n}':")
    if data.get("cost_model") is not None:
        raise SpecsimError(f"{where}: field 'cost_model' {OTHER_COST_MODEL}")
    out = {**{n: d.question[n] for n in TARGET if n in d.question and n not in data}, **data}
    # copies: the caller's mapping (a scenario's raw fields) is left as it was
    drafts = [dict(x) if isinstance(x, dict) else {"method": x} for x in out.get("drafts") or [{"method": d.draft}]]
    for x in drafts:
        if str(x.get("method", "")).lower() == d.draft.lower() and "acceptance" not in x and d.alphas:
            x["acceptance"] = {"alphas": list(d.alphas)}
    out["drafts"] = drafts
    # the calibration is the target's, one for the scenario: the speculative step's own host cost only where every
    # draft is the one measured
    methods = {str(x.get("method", "")).lower() for x in drafts} - {"none"}
    return out, d.calibration_for(d.draft if methods <= {d.draft.lower()} else "")

"""A Draft from a scenario's or a command's description of it (no file reading: acceptance files are
read at the edges, by the scenario loader or the CLI, and arrive here as an AcceptanceProfile). The
input edge of method names: ``registry.parse_method`` spells them; the method's family builds the rest."""

from __future__ import annotations

from typing import Any

from specsim.acceptance.chain import AcceptanceProfile
from specsim.acceptance.priors import PriorMatch, task_of_dataset
from specsim.cost.model import ModelSpec, load_model
from specsim.drafts.draft import Draft
from specsim.drafts.family import DraftFamily
from specsim.drafts.priors import prior_match
from specsim.drafts.registry import METHODS, family_of, parse_method
from specsim.errors import SpecsimError
from specsim.fields import unknown_names

#: Integer settings of a draft description (checked in [1, 1000000]).
INT_FIELDS = ("draft_tp", "draft_vocab", "topk", "num_draft_tokens", "window", "guesses", "draft_layers")


def make_draft(spec: str | dict[str, Any], target: ModelSpec, where: str = "draft", task: str | None = None,
               temperature: float | None = None, held_out_source: str | None = None) -> Draft:
    """A Draft from a method name, a catalogue model name (a draft model), or a mapping
    {method, name, model, draft_tp, draft_vocab, topk, num_draft_tokens, window, guesses, draft_layers,
    checkpoint, task, temperature, trees, acceptance: {alpha | alphas | mean_length + k}}.

    Without an acceptance the draft gets its sourced prior (``acceptance.priors.lookup``) for this
    target, draft model or head checkpoint, task and temperature (the mapping's, else the
    scenario's ``task`` / ``temperature`` passed here), with its band and note; ``held_out_source``
    leaves one source's entries out of that lookup (validating against that source)."""
    data: dict[str, Any] = {"method": spec} if isinstance(spec, str) else dict(spec)
    family = family_of(_method(data, spec, where))
    model = family.draft_model(data, target, where)
    data.pop("model", None)
    acc = data.pop("acceptance", None)
    task, temperature = _task_and_temperature(data, task, temperature, where)
    checkpoint = data.pop("checkpoint", None)
    # a draft model's prior is keyed by the draft model, a head's by its checkpoint
    profile, prior = _acceptance(acc, family, target, model if model is not None else checkpoint, task, temperature,
                                 held_out_source, where)
    trees, ints = _settings(data, where)
    _applies(family, ints, where)
    if model is not None and "draft_tp" in ints:
        model.check_tp(ints["draft_tp"], f"{where}.draft_tp")
    ints = family.complete(ints, target, where)
    return Draft(method=family.method, acceptance=profile, name=str(data.get("name") or ""), model=model,
                 trees=trees, prior=prior, **ints)


def _method(data: dict[str, Any], spec: str | dict[str, Any], where: str) -> str:
    """The registered method a description names (popping 'method'): a method name in any spelling, or a
    bare catalogue model name (or config path), which means a draft model (then 'model' is set)."""
    given = str(data.pop("method", "") or "")
    method = parse_method(given)
    if method in METHODS:
        return method
    try:
        data["model"] = data.get("model") or given
        load_model(data["model"])
    except SpecsimError:
        raise SpecsimError(f"{where}: unknown draft '{method or spec}' (methods: {', '.join(METHODS)}; "
                           "or a catalogue model name for a draft model)") from None
    return "draft_model"


def _task_and_temperature(data: dict[str, Any], task: str | None, temperature: float | None,
                          where: str) -> tuple[str | None, float | None]:
    """The description's task and temperature (popped), else the ones passed, checked."""
    task = data.pop("task", task)
    if task is not None and task_of_dataset(str(task)) is None:
        raise SpecsimError(f"{where}.task: unknown task {task!r} (chat, code, math, summarisation, translation, rag, "
                           "reasoning, qa, mixed, tool_call, writing)")
    temperature = data.pop("temperature", temperature)
    if temperature is not None and (isinstance(temperature, bool) or not isinstance(temperature, int | float)
                                    or not 0 <= temperature <= 2):
        raise SpecsimError(f"{where}.temperature must be a number in [0, 2], got {temperature!r}")
    return task, temperature


def _acceptance(acc: Any, family: DraftFamily, target: ModelSpec, draft: Any, task: str | None,
                temperature: float | None, held_out_source: str | None,
                where: str) -> tuple[AcceptanceProfile, PriorMatch | None]:
    """The draft's acceptance (a profile, a number, a mapping, or None: the sourced prior) and the prior
    it came from (None when given)."""
    if isinstance(acc, AcceptanceProfile):
        return acc, None
    if acc is None:
        if not family.speculates:
            return AcceptanceProfile.from_alpha(0.0), None
        prior = prior_match(family.method, target, draft, task_of_dataset(str(task)) if task else None, temperature,
                            held_out_source)
        return prior.profile("central"), prior
    if isinstance(acc, int | float) and not isinstance(acc, bool):
        return AcceptanceProfile.from_alpha(float(acc)), None
    if isinstance(acc, dict):
        return _given_acceptance(acc, where), None
    raise SpecsimError(f"{where}.acceptance: expected a number or a mapping, got {acc!r}")


def _given_acceptance(acc: dict[str, Any], where: str) -> AcceptanceProfile:
    """An acceptance mapping: {alpha | alphas | acceptance_length + k} (mean_length: its older name)."""
    bad = unknown_names(sorted(map(str, acc)), ("alpha", "alphas", "acceptance_length", "mean_length", "k"),
                        "field")
    if bad is not None:
        raise SpecsimError(f"{where}.acceptance: {bad}")
    if "acceptance_length" in acc:
        if "mean_length" in acc:
            raise SpecsimError(f"{where}.acceptance: give acceptance_length only (mean_length is its old name)")
        acc = {("mean_length" if key == "acceptance_length" else key): value for key, value in acc.items()}
    given = [key for key in ("alpha", "alphas", "mean_length") if key in acc]
    if len(given) > 1:
        raise SpecsimError(f"{where}.acceptance: give one of alpha, alphas, acceptance_length, got {', '.join(given)}")
    if "k" in acc and "mean_length" not in acc:
        raise SpecsimError(f"{where}.acceptance.k: the draft length an acceptance_length was measured at; give it "
                           "with acceptance_length only")
    for key in ("alpha", "mean_length", "k"):
        if key in acc and (isinstance(acc[key], bool) or not isinstance(acc[key], int | float)):
            raise SpecsimError(f"{where}.acceptance.{key} must be a number, got {acc[key]!r}")
    if "alphas" in acc and (not isinstance(acc["alphas"], list) or not acc["alphas"] or any(
            isinstance(a, bool) or not isinstance(a, int | float) for a in acc["alphas"])):
        raise SpecsimError(f"{where}.acceptance.alphas must be a non-empty list of numbers, got {acc['alphas']!r}")
    if "k" in acc and acc["k"] != int(acc["k"]):
        raise SpecsimError(f"{where}.acceptance.k must be an integer, got {acc['k']!r}")
    try:
        if "alpha" in acc:
            return AcceptanceProfile.from_alpha(float(acc["alpha"]))
        if "alphas" in acc:
            return AcceptanceProfile.from_alphas([float(a) for a in acc["alphas"]])
        if "mean_length" in acc and "k" in acc:
            return AcceptanceProfile.from_mean_length(float(acc["mean_length"]), int(acc["k"]))
    except SpecsimError as exc:
        field = "acceptance_length" if given[0] == "mean_length" else given[0]
        raise SpecsimError(f"{where}.acceptance.{field}: {exc}") from None
    raise SpecsimError(f"{where}.acceptance: give alpha, alphas, acceptance_length + k, or file")


def _applies(family: DraftFamily, ints: dict[str, int], where: str) -> None:
    """Refuse a setting the family does not read (it would change nothing); topk 1 is a chain, true of any."""
    for key, value in ints.items():
        if key not in family.settings and not (key == "topk" and value == 1):
            takes = f"it takes {', '.join(sorted(family.settings))}" if family.settings else "it takes none"
            raise SpecsimError(f"{where}.{key}: {family.method} does not read {key} ({takes})")


def _settings(data: dict[str, Any], where: str) -> tuple[bool, dict[str, int]]:
    """(trees, the integer settings given) from what is left of a description, checked."""
    allowed = {"name", "trees", *INT_FIELDS}
    acceptance = {"alpha", "alphas", "acceptance_length", "mean_length"} & set(map(str, data))
    if acceptance:
        key = sorted(acceptance)[0]
        raise SpecsimError(f"{where}: field '{key}' is an acceptance: give it as acceptance: {{{key}: ...}}")
    bad = unknown_names(sorted(map(str, data)), {*allowed, "method", "model", "acceptance", "checkpoint", "task",
                                                   "temperature"}, "field")
    if bad is not None:
        raise SpecsimError(f"{where}: {bad}")
    trees = data.get("trees", True)
    if not isinstance(trees, bool):
        raise SpecsimError(f"{where}.trees must be true or false, got {trees!r}")
    ints = {key: data[key] for key in INT_FIELDS if data.get(key) is not None}
    for key, value in ints.items():
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1_000_000:
            raise SpecsimError(f"{where}.{key} must be an integer in [1, 1000000], got {value!r}")
    return trees, ints

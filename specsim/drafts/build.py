"""A Draft from a scenario's or a command's description of it (no file reading: acceptance files are
read at the edges, by the scenario loader or the CLI, and arrive here as an AcceptanceProfile)."""

from __future__ import annotations

from typing import Any

from specsim.acceptance.chain import AcceptanceProfile
from specsim.acceptance.priors import PriorMatch, canonical_method, task_of_dataset
from specsim.cost.model import ModelSpec, load_model
from specsim.drafts.draft import METHODS, PARALLEL_LAYERS, Draft
from specsim.drafts.priors import prior_match
from specsim.errors import SpecsimError


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
    given = str(data.pop("method", "") or "")
    method = given.lower().replace("-", "_")
    if method not in METHODS and canonical_method(method) in METHODS:
        method = canonical_method(method)  # eagle-3, pld, sps, ...
    if method not in METHODS:
        try:  # a bare catalogue model name (or config path) means a draft model
            data["model"] = data.get("model") or given
            load_model(data["model"])
            method = "draft_model"
        except SpecsimError:
            raise SpecsimError(f"{where}: unknown draft '{method or spec}' (methods: {', '.join(METHODS)}; "
                               "or a catalogue model name for a draft model)") from None
    model = None
    if method == "draft_model":
        if not data.get("model"):
            raise SpecsimError(f"{where}: a draft_model needs 'model' (a catalogue name or config.json path)")
        model = load_model(str(data.pop("model")))
        # Same tokenizer: vocabularies equal up to embedding padding (Qwen2.5 pads 151,646 tokens
        # to 151,936 or 152,064 by model size); Llama-2 (32k) vs Llama-3 (128k) is refused.
        if abs(model.vocab - target.vocab) > 0.01 * target.vocab:
            raise SpecsimError(f"{where}: draft {model.name} has vocabulary {model.vocab}, target {target.name} "
                               f"{target.vocab}: a draft model must share the target's tokenizer")
    data.pop("model", None)
    acc = data.pop("acceptance", None)
    task = data.pop("task", task)
    if task is not None and task_of_dataset(str(task)) is None:
        raise SpecsimError(f"{where}.task: unknown task {task!r} (chat, code, math, summarisation, translation, rag, "
                           "reasoning, qa, mixed, tool_call, writing)")
    temperature = data.pop("temperature", temperature)
    if temperature is not None and (isinstance(temperature, bool) or not isinstance(temperature, int | float)
                                    or not 0 <= temperature <= 2):
        raise SpecsimError(f"{where}.temperature must be a number in [0, 2], got {temperature!r}")
    checkpoint = data.pop("checkpoint", None)
    prior: PriorMatch | None = None
    if isinstance(acc, AcceptanceProfile):
        profile = acc
    elif acc is None:
        if method == "none":
            profile = AcceptanceProfile.from_alpha(0.0)
        else:
            prior = prior_match(method, target, model if method == "draft_model" else checkpoint,
                                task_of_dataset(str(task)) if task else None, temperature, held_out_source)
            profile = prior.profile("central")
    elif isinstance(acc, int | float) and not isinstance(acc, bool):
        profile = AcceptanceProfile.from_alpha(float(acc))
    elif isinstance(acc, dict):
        for key in ("alpha", "mean_length", "k"):
            if key in acc and (isinstance(acc[key], bool) or not isinstance(acc[key], int | float)):
                raise SpecsimError(f"{where}.acceptance.{key} must be a number, got {acc[key]!r}")
        if "alphas" in acc and (not isinstance(acc["alphas"], list) or not acc["alphas"] or any(
                isinstance(a, bool) or not isinstance(a, int | float) for a in acc["alphas"])):
            raise SpecsimError(f"{where}.acceptance.alphas must be a non-empty list of numbers, got {acc['alphas']!r}")
        if "k" in acc and acc["k"] != int(acc["k"]):
            raise SpecsimError(f"{where}.acceptance.k must be an integer, got {acc['k']!r}")
        if "alpha" in acc:
            profile = AcceptanceProfile.from_alpha(float(acc["alpha"]))
        elif "alphas" in acc:
            profile = AcceptanceProfile.from_alphas([float(a) for a in acc["alphas"]])
        elif "mean_length" in acc and "k" in acc:
            profile = AcceptanceProfile.from_mean_length(float(acc["mean_length"]), int(acc["k"]))
        else:
            raise SpecsimError(f"{where}.acceptance: give alpha, alphas, mean_length + k, or file")
    else:
        raise SpecsimError(f"{where}.acceptance: expected a number or a mapping, got {acc!r}")
    allowed = {"name", "draft_tp", "draft_vocab", "topk", "num_draft_tokens", "window", "guesses", "draft_layers",
               "trees"}
    unknown = set(data) - allowed
    if unknown:
        raise SpecsimError(f"{where}: unknown field(s) {sorted(map(str, unknown))} "
                           "(allowed: method, model, acceptance, "
                           f"{', '.join(sorted(allowed))})")
    trees = data.get("trees", True)
    if not isinstance(trees, bool):
        raise SpecsimError(f"{where}.trees must be true or false, got {trees!r}")
    ints = {key: data[key] for key in ("draft_tp", "draft_vocab", "topk", "num_draft_tokens", "window", "guesses",
                                       "draft_layers") if data.get(key) is not None}
    for key, value in ints.items():
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1_000_000:
            raise SpecsimError(f"{where}.{key} must be an integer in [1, 1000000], got {value!r}")
    if model is not None and "draft_tp" in ints:
        model.check_tp(ints["draft_tp"], f"{where}.draft_tp")
    if method == "eagle3" and "draft_vocab" not in ints:
        ints["draft_vocab"] = min(32000, target.vocab)  # EAGLE-3 released heads: 32k draft vocabulary
    if method == "mtp" and not target.mtp_layers:
        raise SpecsimError(f"{where}: {target.name} ships no MTP module; use another draft")
    if method in PARALLEL_LAYERS and "draft_layers" not in ints:
        ints["draft_layers"] = PARALLEL_LAYERS[method]
    return Draft(method=method, acceptance=profile, name=str(data.get("name") or ""), model=model, trees=trees,
                 prior=prior, **ints)

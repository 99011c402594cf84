"""A Draft from a scenario's or a command's description of it (no file reading: acceptance files are
read at the edges, by the scenario loader or the CLI, and arrive here as an AcceptanceProfile)."""

from __future__ import annotations

from typing import Any

from specsim.acceptance.chain import AcceptanceProfile
from specsim.cost.model import ModelSpec, load_model
from specsim.drafts.draft import METHODS, Draft
from specsim.drafts.priors import prior_profile
from specsim.errors import SpecsimError


def make_draft(spec: str | dict[str, Any], target: ModelSpec, where: str = "draft") -> Draft:
    """A Draft from a method name, a catalogue model name (a draft model), or a mapping
    {method, name, model, draft_tp, draft_vocab, topk, num_draft_tokens, window, guesses,
    acceptance: {alpha | alphas | mean_length + k}}."""
    data: dict[str, Any] = {"method": spec} if isinstance(spec, str) else dict(spec)
    given = str(data.pop("method", "") or "")
    method = given.lower().replace("-", "_")
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
    if isinstance(acc, AcceptanceProfile):
        profile = acc
    elif acc is None:
        profile = AcceptanceProfile.from_alpha(0.0) if method == "none" else prior_profile(method)
    elif isinstance(acc, int | float) and not isinstance(acc, bool):
        profile = AcceptanceProfile.from_alpha(float(acc))
    elif isinstance(acc, dict):
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
    allowed = {"name", "draft_tp", "draft_vocab", "topk", "num_draft_tokens", "window", "guesses"}
    unknown = set(data) - allowed
    if unknown:
        raise SpecsimError(f"{where}: unknown field(s) {sorted(unknown)} (allowed: method, model, acceptance, "
                           f"{', '.join(sorted(allowed))})")
    ints = {key: int(data[key]) for key in ("draft_tp", "draft_vocab", "topk", "num_draft_tokens", "window", "guesses")
            if data.get(key) is not None}
    for key, value in ints.items():
        if value < 1:
            raise SpecsimError(f"{where}.{key} must be >= 1, got {value}")
    if method == "eagle3" and "draft_vocab" not in ints:
        ints["draft_vocab"] = min(32000, target.vocab)  # EAGLE-3 released heads: 32k draft vocabulary
    if method == "mtp" and not target.mtp_layers:
        raise SpecsimError(f"{where}: {target.name} ships no MTP module; use another draft")
    return Draft(method=method, acceptance=profile, name=str(data.get("name") or ""), model=model, **ints)

"""vLLM's configuration of a plan: `--speculative-config`, its tree alternative and its dynamic speculative
decoding profile.

Knob names from vLLM's SpeculativeConfig (method, num_speculative_tokens,
num_speculative_tokens_per_batch_size, speculative_token_tree: node paths, needs the TREE_ATTN backend,
draft_tensor_parallel_size, prompt_lookup_max/min) and its dynamic speculative decoding profile
(DynamicSpeculativeConfig: max_num_speculative_tokens, acceptance_rate_per_pos, batch_stats
{batch: {drafts: step ms}}) (../shared/research/anchors.md §3). vLLM changes the chain length per batch; its
tree is one static shape, the low-load one.
"""

from __future__ import annotations

from collections.abc import Callable

from specsim.engines.configs.bands import DRAFT_MODEL_PATH, Speculation
from specsim.records import Json

VLLM_METHOD = {"draft_model": "draft_model", "ngram": "ngram", "suffix": "suffix", "medusa": "medusa",
               "eagle": "eagle", "eagle2": "eagle", "eagle3": "eagle3", "mtp": "deepseek_mtp",
               "p_eagle": "eagle3", "dflash": "dflash", "dspark": "dspark", "pard": "draft_model"}

#: the dynamic speculative decoding profile's settings (DynamicSpeculativeConfig)
DYNAMIC_KEYS = ("max_num_speculative_tokens", "acceptance_rate_per_pos", "batch_stats")


def _draft_model(spec: Speculation) -> dict[str, Json]:
    """A separate draft model: its path, and its tensor parallelism where it has its own."""
    out: dict[str, Json] = {"model": spec.draft_model or DRAFT_MODEL_PATH}
    if spec.draft_tp:
        out["draft_tensor_parallel_size"] = spec.draft_tp
    return out


def _parallel_draft_model(spec: Speculation) -> dict[str, Json]:
    """PARD: a draft model run as a parallel drafter (vLLM PR #32887; docs/features/speculative_decoding/pard.md,
    vllm-project/vllm#35973)."""
    return {**_draft_model(spec), "parallel_drafting": True}


def _head(spec: Speculation) -> dict[str, Json]:
    """A head trained for the target."""
    return {"model": f"<{spec.method} head for the target>"}


def _parallel_head(spec: Speculation) -> dict[str, Json]:
    return {**_head(spec), "parallel_drafting": True}


def _ngram(spec: Speculation) -> dict[str, Json]:
    """Prompt lookup's n-gram window."""
    return {"prompt_lookup_max": 4, "prompt_lookup_min": 2}


#: what each method adds to its --speculative-config (a method not here adds nothing)
VLLM_SETTINGS: dict[str, Callable[[Speculation], dict[str, Json]]] = {
    "draft_model": _draft_model, "eagle": _head, "eagle2": _head, "eagle3": _head, "medusa": _head,
    "p_eagle": _parallel_head, "dflash": _head, "dspark": _head, "ngram": _ngram, "pard": _parallel_draft_model}


def speculative_config(spec: Speculation) -> dict[str, Json]:
    """--speculative-config: the method, the largest chain and, where it changes with batch, the chain length
    per batch band [batch_from, batch_to, k]."""
    bands = spec.bands
    cfg: dict[str, Json] = {"method": VLLM_METHOD[spec.method], "num_speculative_tokens": bands.k_max}
    if bands.per_batch:
        cfg["num_speculative_tokens_per_batch_size"] = [[g.batch_from, g.batch_to, g.k] for g in bands.chain]
    if spec.method in VLLM_SETTINGS:
        cfg.update(VLLM_SETTINGS[spec.method](spec))
    return cfg


def tree_alternative(spec: Speculation, cfg: dict[str, Json]) -> dict[str, Json]:
    """vLLM's tree is one static shape for every batch: the low-load tree, as an alternative."""
    paths = spec.tree_paths
    tree: dict[str, Json] = {key: v for key, v in cfg.items() if key != "num_speculative_tokens_per_batch_size"}
    tree.update({"num_speculative_tokens": len(paths), "speculative_token_tree": str([tuple(x) for x in paths])})
    return {"up_to_batch": spec.bands.trees[0].batch_to, "--speculative-config": tree,
            "attention_backend": "TREE_ATTN"}


def dynamic_config(spec: Speculation, cfg: dict[str, Json]) -> dict[str, Json]:
    """The dynamic speculative decoding profile, with the chain lengths per batch it starts from."""
    profile = spec.dynamic_profile or {}
    dyn: dict[str, Json] = {key: v for key, v in profile.items() if key in DYNAMIC_KEYS}
    dyn["num_speculative_tokens_per_batch_size"] = cfg.get("num_speculative_tokens_per_batch_size",
                                                           [[1, spec.bands.last_on, spec.bands.k_max]])
    return dyn


def vllm_config(spec: Speculation) -> Json:
    """vLLM's settings for the plan (None: vLLM does not run the method)."""
    if spec.method not in VLLM_METHOD:
        return None
    cfg = speculative_config(spec)
    out: dict[str, Json] = {"--speculative-config": cfg}
    if spec.bands.trees:
        out["tree_alternative"] = tree_alternative(spec, cfg)
    if spec.dynamic_profile:
        out["dynamic_speculative_config"] = dynamic_config(spec, cfg)
    return out

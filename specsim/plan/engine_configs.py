"""A plan's policy rendered as engine configuration: vLLM, TensorRT-LLM, SGLang.

Knob names from the engines' docs and config classes (../shared/research/anchors.md §3):
vLLM SpeculativeConfig (method, num_speculative_tokens, num_speculative_tokens_per_batch_size,
draft_tensor_parallel_size, prompt_lookup_max/min), TensorRT-LLM LLM-API decoding configs
(max_draft_len, draft_len_schedule, max_concurrency), SGLang server flags (--speculative-*).
"""

from __future__ import annotations

from typing import Any

VLLM_METHOD = {"draft_model": "draft_model", "ngram": "ngram", "suffix": "suffix", "medusa": "medusa",
               "eagle": "eagle", "eagle2": "eagle", "eagle3": "eagle3", "mtp": "deepseek_mtp"}
TRTLLM_TYPE = {"draft_model": "DraftTarget", "ngram": "NGram", "medusa": "Medusa", "eagle": "Eagle",
               "eagle2": "Eagle", "eagle3": "Eagle", "mtp": "MTP", "lookahead": "Lookahead"}
SGLANG_ALGO = {"draft_model": "STANDALONE", "ngram": "NGRAM", "eagle": "EAGLE", "eagle2": "EAGLE",
               "eagle3": "EAGLE3", "mtp": "NEXTN"}


def _schedule(policy: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [seg for seg in policy if seg["k"] > 0]


def engine_configs(method: str, policy: list[dict[str, Any]], draft_model: str | None = None,
                   draft_tp: int | None = None, topk: int = 1, num_draft_tokens: int | None = None
                   ) -> dict[str, Any]:
    """{vllm, trtllm, sglang} snippets for a method and a policy of {batch_from, batch_to, k}."""
    on = _schedule(policy)
    if method == "none" or not on:
        return {"vllm": None, "trtllm": None, "sglang": None,
                "note": "no speculation: leave speculative decoding off"}
    k_max = max(seg["k"] for seg in on)
    last_on = max(seg["batch_to"] for seg in on)
    out: dict[str, Any] = {}
    if method in VLLM_METHOD:
        cfg: dict[str, Any] = {"method": VLLM_METHOD[method], "num_speculative_tokens": k_max}
        if len(on) > 1 or on[0]["batch_from"] > 1 or any(seg["k"] <= 0 for seg in policy):
            cfg["num_speculative_tokens_per_batch_size"] = [[g["batch_from"], g["batch_to"], g["k"]] for g in on]
        if method == "draft_model":
            cfg["model"] = draft_model or "<draft model path>"
            if draft_tp:
                cfg["draft_tensor_parallel_size"] = draft_tp
        elif method in ("eagle", "eagle2", "eagle3", "medusa"):
            cfg["model"] = f"<{method} head for the target>"
        elif method == "ngram":
            cfg.update({"prompt_lookup_max": 4, "prompt_lookup_min": 2})
        out["vllm"] = {"--speculative-config": cfg}
    else:
        out["vllm"] = None
    if method in TRTLLM_TYPE:
        out["trtllm"] = {"decoding_type": TRTLLM_TYPE[method], "max_draft_len": k_max,
                         "draft_len_schedule": {str(seg["batch_to"]): seg["k"] for seg in on},
                         "max_concurrency": last_on}
    else:
        out["trtllm"] = None
    if method in SGLANG_ALGO:
        # SGLang has no per-batch schedule: the k of the lowest-load segment, and speculation off
        # (a second server or route) above the last batch that pays.
        k = on[0]["k"]
        tokens = min(num_draft_tokens, topk * k) + 1 if topk > 1 and num_draft_tokens else k + 1
        out["sglang"] = {"--speculative-algorithm": SGLANG_ALGO[method], "--speculative-num-steps": k,
                         "--speculative-eagle-topk": topk, "--speculative-num-draft-tokens": tokens}
        if method == "draft_model":
            out["sglang"]["--speculative-draft-model-path"] = draft_model or "<draft model path>"
    else:
        out["sglang"] = None
    out["note"] = f"speculate up to batch {last_on}; off above"
    return out

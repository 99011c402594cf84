"""A plan's policy rendered as engine configuration: vLLM, TensorRT-LLM, SGLang.

Knob names from the engines' docs and config classes (../shared/research/anchors.md §3):
vLLM SpeculativeConfig (method, num_speculative_tokens, num_speculative_tokens_per_batch_size,
speculative_token_tree: node paths, needs the TREE_ATTN backend, draft_tensor_parallel_size,
prompt_lookup_max/min) and its dynamic speculative decoding profile (DynamicSpeculativeConfig:
max_num_speculative_tokens, acceptance_rate_per_pos, batch_stats {batch: {drafts: step ms}}),
TensorRT-LLM LLM-API decoding configs (max_draft_len, draft_len_schedule, max_concurrency; EAGLE-3
use_dynamic_tree, dynamic_tree_max_topK, max_total_draft_tokens), SGLang server flags
(--speculative-num-steps / --speculative-eagle-topk / --speculative-num-draft-tokens, the last
counting the root token).

SGLang has no per-batch schedule: it gets one server configuration per batch band of the policy
(run the band that matches the load, or route by load between servers). vLLM and TensorRT-LLM
change the chain length per batch; a tree is one static shape, the low-load one.
"""

from __future__ import annotations

import json
from typing import Any

from specsim.acceptance.trees import Tree, eagle2_tree, sibling_probs_hazard

VLLM_METHOD = {"draft_model": "draft_model", "ngram": "ngram", "suffix": "suffix", "medusa": "medusa",
               "eagle": "eagle", "eagle2": "eagle", "eagle3": "eagle3", "mtp": "deepseek_mtp",
               "p_eagle": "eagle3", "dflash": "dflash", "dspark": "dspark"}
TRTLLM_TYPE = {"draft_model": "DraftTarget", "ngram": "NGram", "medusa": "Medusa", "eagle": "Eagle",
               "eagle2": "Eagle", "eagle3": "Eagle", "mtp": "MTP", "lookahead": "Lookahead", "dflash": "DFlash"}
SGLANG_ALGO = {"draft_model": "STANDALONE", "ngram": "NGRAM", "eagle": "EAGLE", "eagle2": "EAGLE",
               "eagle3": "EAGLE3", "mtp": "NEXTN"}


#: SGLang's topk > 1 path runs on other kernels than its chains, and the model does not price that switch.
SGLANG_TREE_CAVEAT = (
    "topk > 1: on Hopper SGLang's default attention backend is FA3 only for chains (server_args "
    "is_no_spec_infer_or_topk_one), so a tree runs on FlashInfer, which is not modelled here; the SpecBundle "
    "dashboard (H200, Llama-3.1-8B EAGLE-3) measured topk 3-4 steps ~10% dearer than priced and small trees "
    "accepting less than a chain of the same budget: benchmark the topk 1 chain against it on your traffic")


def _schedule(policy: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [seg for seg in policy if seg["k"] > 0]


def _tokens(seg: dict[str, Any]) -> int:
    """SGLang --speculative-num-draft-tokens: the verified drafts plus the root token."""
    return int(seg["num_draft_tokens"]) + 1 if seg.get("num_draft_tokens") else int(seg["k"]) + 1


def tree_paths(seg: dict[str, Any], rates: list[float] | None = None) -> list[tuple[int, ...]]:
    """A static tree for engines that take one (vLLM speculative_token_tree, TensorRT-LLM eagle_choices):
    the EAGLE-2 tree of the segment's (topk, depth, nodes) under a flat 0.7 rate unless rates are given."""
    depth = int(seg["k"])
    r = rates[:depth] if rates else [0.7] * depth
    probs = sibling_probs_hazard(r, int(seg["topk"]))
    tree: Tree = eagle2_tree(probs, int(seg["topk"]), depth, int(seg["num_draft_tokens"]))
    return tree.paths()


def engine_configs(method: str, policy: list[dict[str, Any]], draft_model: str | None = None,
                   draft_tp: int | None = None, topk: int = 1, num_draft_tokens: int | None = None,
                   dynamic_profile: dict[str, Any] | None = None,
                   chain_policy: list[dict[str, Any]] | None = None, hopper_fa3: bool = True) -> dict[str, Any]:
    """{vllm, trtllm, sglang} snippets for a method and a policy of {batch_from, batch_to, k[, topk,
    num_draft_tokens]} segments. `chain_policy` is the best chain-only schedule (for the per-batch chain
    lengths of vLLM and TensorRT-LLM when the policy uses trees); `topk` / `num_draft_tokens` are the old
    fixed-tree arguments, applied to segments that do not carry their own. `hopper_fa3`: the GPU is one on
    which SGLang's default attention backend is FA3 (Hopper), where its trees switch kernels (the caveat)."""

    def norm(segs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = [dict(seg) for seg in segs]
        for seg in out:
            if "num_draft_tokens" not in seg and topk > 1 and num_draft_tokens:
                seg["topk"], seg["num_draft_tokens"] = topk, min(num_draft_tokens, topk * seg["k"])
            seg.setdefault("topk", 1)
            seg.setdefault("num_draft_tokens", None)
        return out

    policy = norm(policy)
    on = _schedule(policy)
    if method == "none" or not on:
        return {"vllm": None, "trtllm": None, "sglang": None,
                "note": "no speculation: leave speculative decoding off"}
    trees = [seg for seg in on if seg.get("num_draft_tokens")]
    chain_on = _schedule(norm(chain_policy)) if chain_policy else [seg for seg in on if not seg.get("num_draft_tokens")]
    if not chain_on:
        chain_on = [{**seg, "topk": 1, "num_draft_tokens": None} for seg in on]
    k_max = max(seg["k"] for seg in chain_on)
    last_on = max(seg["batch_to"] for seg in on)
    lowest = on[0]
    out: dict[str, Any] = {}
    if method in VLLM_METHOD:
        cfg: dict[str, Any] = {"method": VLLM_METHOD[method], "num_speculative_tokens": k_max}
        if len(chain_on) > 1 or chain_on[0]["batch_from"] > 1 or any(seg["k"] <= 0 for seg in policy):
            cfg["num_speculative_tokens_per_batch_size"] = [[g["batch_from"], g["batch_to"], g["k"]]
                                                            for g in chain_on]
        if method == "draft_model":
            cfg["model"] = draft_model or "<draft model path>"
            if draft_tp:
                cfg["draft_tensor_parallel_size"] = draft_tp
        elif method in ("eagle", "eagle2", "eagle3", "medusa", "p_eagle", "dflash", "dspark"):
            cfg["model"] = f"<{method} head for the target>"
            if method == "p_eagle":
                cfg["parallel_drafting"] = True
        elif method == "ngram":
            cfg.update({"prompt_lookup_max": 4, "prompt_lookup_min": 2})
        vllm: dict[str, Any] = {"--speculative-config": cfg}
        if trees:
            # vLLM's tree is one static shape for every batch: the low-load tree, as an alternative
            paths = tree_paths(trees[0])
            vllm["tree_alternative"] = {
                "up_to_batch": trees[0]["batch_to"],
                "--speculative-config": {**{key: v for key, v in cfg.items()
                                            if key != "num_speculative_tokens_per_batch_size"},
                                         "num_speculative_tokens": len(paths),
                                         "speculative_token_tree": str([tuple(x) for x in paths])},
                "attention_backend": "TREE_ATTN"}
        if dynamic_profile:
            dyn = {key: v for key, v in dynamic_profile.items() if key in (
                "max_num_speculative_tokens", "acceptance_rate_per_pos", "batch_stats")}
            dyn["num_speculative_tokens_per_batch_size"] = cfg.get("num_speculative_tokens_per_batch_size",
                                                                   [[1, last_on, k_max]])
            vllm["dynamic_speculative_config"] = dyn
        out["vllm"] = vllm
    else:
        out["vllm"] = None
    if method in TRTLLM_TYPE:
        trt: dict[str, Any] = {"decoding_type": TRTLLM_TYPE[method], "max_draft_len": k_max,
                               "draft_len_schedule": {str(seg["batch_to"]): seg["k"] for seg in chain_on},
                               "max_concurrency": last_on}
        if trees and method in ("eagle", "eagle2", "eagle3"):
            t0 = trees[0]
            trt["tree_alternative"] = {"up_to_batch": t0["batch_to"], "use_dynamic_tree": True,
                                       "dynamic_tree_max_topK": t0["topk"],
                                       "max_total_draft_tokens": t0["num_draft_tokens"], "max_draft_len": t0["k"]}
        elif trees and method == "medusa":
            trt["medusa_choices"] = [list(x) for x in tree_paths(trees[0])]
        out["trtllm"] = trt
    else:
        out["trtllm"] = None
    if method in SGLANG_ALGO:
        bands = []
        for seg in on:
            band = {"batch_from": seg["batch_from"], "batch_to": seg["batch_to"],
                    "--speculative-algorithm": SGLANG_ALGO[method], "--speculative-num-steps": seg["k"],
                    "--speculative-eagle-topk": seg["topk"] if seg.get("num_draft_tokens") else 1,
                    "--speculative-num-draft-tokens": _tokens(seg)}
            if method == "draft_model":
                band["--speculative-draft-model-path"] = draft_model or "<draft model path>"
            bands.append(band)
        first = {key: v for key, v in bands[0].items() if key.startswith("--")}
        out["sglang"] = {**first, "by_batch": bands} if len(bands) > 1 else first
        if len(bands) > 1:
            out["sglang"]["note"] = ("SGLang fixes these per server: run the band that matches the load (or route "
                                     "by load between servers); the top-level flags are the lowest-load band's")
        if hopper_fa3 and any(b["--speculative-eagle-topk"] > 1 for b in bands):
            out["sglang"]["caveat"] = SGLANG_TREE_CAVEAT
    else:
        out["sglang"] = None
    out["note"] = f"speculate up to batch {last_on}; off above" + (
        f" (low-load tree: topk {lowest['topk']}, {lowest['num_draft_tokens']} nodes, depth {lowest['k']})"
        if lowest.get("num_draft_tokens") else "")
    return out


# ---------------------------------------------------------------------------------------------
# engine configs as files people read

ENGINE_CONFIG_DIR = "engine-configs"
JSON_WIDTH = 100


def pretty_json(value: Any, width: int = JSON_WIDTH) -> str:
    """JSON for people: a mapping or list that fits in `width` characters stays on one line, a longer one
    puts each entry on its own indented line, and a long list of numbers or strings is packed several to a
    line (a `speculative_token_tree`, a `batch_stats` row). Valid JSON: `json.loads` gives `value` back."""
    return _pretty(value, 0, width, width)


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _flat(v: list[Any]) -> bool:
    """A short list of scalars (a [from, to, k] row)."""
    return all(not isinstance(x, dict | list) for x in v) and len(json.dumps(v, default=float)) <= 40


def _pretty(value: Any, indent: int, room: int, width: int, row: bool = False) -> str:
    """`value` at `indent`, on one line when it fits in `room`; `row`: an element of a list (a table row)."""
    flat = json.dumps(value, default=float, ensure_ascii=False)
    if len(flat) <= room or not isinstance(value, dict | list) or not value:
        return flat
    inner = indent + 2
    pad = " " * inner
    # packed several to a line: a list of numbers, strings or short flat lists, a table row, a row of numbers;
    # one entry per line: a mapping of settings (the engine's flags)
    packed = (all(not isinstance(v, dict) and (not isinstance(v, list) or _flat(v)) for v in value)
              if isinstance(value, list) else
              all(not isinstance(v, dict | list) for v in value.values())
              and (row or all(_number(v) for v in value.values())))
    if packed:
        items = ([f"{json.dumps(str(k), ensure_ascii=False)}: {json.dumps(v, default=float, ensure_ascii=False)}"
                  for k, v in value.items()] if isinstance(value, dict) else
                 [json.dumps(v, default=float, ensure_ascii=False) for v in value])
        lines: list[str] = []
        line = ""
        for item in items:
            if line and len(line) + 2 + len(item) > width - inner - 1:
                lines.append(line + ",")
                line = item
            else:
                line = f"{line}, {item}" if line else item
        lines.append(line)
        body = "\n".join(pad + x for x in lines)
    elif isinstance(value, dict):
        parts = []
        for k, v in value.items():
            key = json.dumps(str(k), ensure_ascii=False) + ": "
            parts.append(pad + key + _pretty(v, inner, width - inner - len(key) - 1, width))
        body = ",\n".join(parts)
    else:
        body = ",\n".join(pad + _pretty(v, inner, width - inner - 1, width, row=True) for v in value)
    opening, closing = "{}" if isinstance(value, dict) else "[]"
    return f"{opening}\n{body}\n{' ' * indent}{closing}"


def engine_config_files(configs: dict[str, Any]) -> dict[str, str]:
    """Each engine's configuration as a file, ENGINE_CONFIG_DIR/ENGINE.json, laid out by `pretty_json` (the report
    writes them beside itself, `specsim plan --engine-configs DIR` into DIR)."""
    return {f"{ENGINE_CONFIG_DIR}/{name}.json": pretty_json(cfg) + "\n" for name, cfg in configs.items()
            if isinstance(cfg, dict)}

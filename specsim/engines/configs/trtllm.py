"""TensorRT-LLM's configuration of a plan: its LLM-API decoding config.

Knob names from TensorRT-LLM's LLM-API decoding configs (max_draft_len, draft_len_schedule, max_concurrency;
EAGLE-3 use_dynamic_tree, dynamic_tree_max_topK, max_total_draft_tokens; Medusa's medusa_choices)
(../shared/research/anchors.md §3). It changes the chain length per batch; a tree is one static shape, the
low-load one.
"""

from __future__ import annotations

from collections.abc import Callable

from specsim.engines.configs.bands import Speculation
from specsim.records import Json

TRTLLM_TYPE = {"draft_model": "DraftTarget", "ngram": "NGram", "medusa": "Medusa", "eagle": "Eagle",
               "eagle2": "Eagle", "eagle3": "Eagle", "mtp": "MTP", "lookahead": "Lookahead", "dflash": "DFlash"}


def _dynamic_tree(spec: Speculation) -> dict[str, Json]:
    """EAGLE's dynamic tree in the low-load tree's shape, as an alternative up to its batch."""
    t0 = spec.bands.trees[0]
    return {"tree_alternative": {"up_to_batch": t0.batch_to, "use_dynamic_tree": True,
                                 "dynamic_tree_max_topK": t0.topk, "max_total_draft_tokens": t0.num_draft_tokens,
                                 "max_draft_len": t0.k}}


def _medusa_choices(spec: Speculation) -> dict[str, Json]:
    """Medusa's static tree: the low-load tree's node paths."""
    return {"medusa_choices": [list(x) for x in spec.tree_paths]}


#: what a policy with trees adds, for the methods that take a tree
TRTLLM_TREE: dict[str, Callable[[Speculation], dict[str, Json]]] = {
    "eagle": _dynamic_tree, "eagle2": _dynamic_tree, "eagle3": _dynamic_tree, "medusa": _medusa_choices}


def trtllm_config(spec: Speculation) -> Json:
    """TensorRT-LLM's decoding config for the plan (None: TensorRT-LLM does not run the method)."""
    if spec.method not in TRTLLM_TYPE:
        return None
    bands = spec.bands
    trt: dict[str, Json] = {"decoding_type": TRTLLM_TYPE[spec.method], "max_draft_len": bands.k_max,
                            "draft_len_schedule": {str(seg.batch_to): seg.k for seg in bands.chain},
                            "max_concurrency": bands.last_on}
    if bands.trees and spec.method in TRTLLM_TREE:
        trt.update(TRTLLM_TREE[spec.method](spec))
    return trt

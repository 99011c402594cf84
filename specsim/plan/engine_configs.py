"""A plan's policy handed to the engine homes (specsim.engines.configs), which write each engine's
configuration: the policy's bands typed, and the low-load tree's node paths built here, since they need
acceptance/, which sits above engines/."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from specsim.acceptance.sibling_probs import sibling_probs_hazard
from specsim.acceptance.tree_shapes import eagle2_tree
from specsim.acceptance.trees import Tree
from specsim.engines.configs.bands import Band, Bands, Speculation
from specsim.engines.configs.render import render_configs
from specsim.records import Json

#: a band as plans write it (`Segment.record`): batch_from, batch_to, k[, topk, num_draft_tokens]
Record = Mapping[str, int | None]


def tree_paths(band: Band, rates: list[float] | None = None) -> list[tuple[int, ...]]:
    """A static tree for engines that take one (vLLM speculative_token_tree, TensorRT-LLM eagle_choices):
    the EAGLE-2 tree of the band's (topk, depth, nodes) under a flat 0.7 rate unless rates are given."""
    depth = band.k
    r = rates[:depth] if rates else [0.7] * depth
    probs = sibling_probs_hazard(r, band.topk)
    tree: Tree = eagle2_tree(probs, band.topk, depth, int(band.num_draft_tokens or 0))
    return tree.paths()


def _band(record: Record) -> Band:
    """A band from its record; one without topk / num_draft_tokens is a chain."""
    return Band(int(record["batch_from"] or 0), int(record["batch_to"] or 0), int(record["k"] or 0),
                int(record.get("topk") or 1), record.get("num_draft_tokens") or None)


def engine_configs(method: str, policy: Sequence[Record], draft_model: str | None = None,
                   draft_tp: int | None = None, dynamic_profile: Mapping[str, Json] | None = None,
                   chain_policy: Sequence[Record] | None = None, hopper_fa3: bool = True) -> dict[str, Json]:
    """{vllm, trtllm, sglang, note} for a method and a policy of {batch_from, batch_to, k[, topk,
    num_draft_tokens]} bands. `chain_policy` is the best chain-only schedule (for the per-batch chain
    lengths of vLLM and TensorRT-LLM when the policy uses trees). `hopper_fa3`: the GPU is one on which
    SGLang's default attention backend is FA3 (Hopper), where its trees switch kernels (the caveat)."""
    bands = Bands.of([_band(r) for r in policy], [_band(r) for r in chain_policy or ()])
    tree = bands.low_tree
    paths = tuple(tree_paths(tree)) if tree is not None else ()
    return render_configs(Speculation(method, bands, draft_model, draft_tp, paths, dynamic_profile, hopper_fa3))

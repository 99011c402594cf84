"""Standard draft-tree shapes: a chain, Medusa's product trees, EAGLE-2's expand-then-rerank trees (and their
expected accepted length without building them), and the static trees published with EAGLE-1 and Medusa."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np
from numpy.typing import ArrayLike

from specsim.acceptance.chain import check_rates
from specsim.acceptance.trees import FloatArray, Tree, as_prob_matrix, check_rank_monotone
from specsim.errors import SpecsimError


def chain(k: int) -> Tree:
    """A chain of k drafts: ``parents = [-1, 0, ..., k-2]``."""
    if k < 0:
        raise SpecsimError(f"k must be >= 0, got {k}")
    return Tree(tuple(range(-1, k - 1)))


def medusa_tree(topk_per_depth: Sequence[int]) -> Tree:
    """A static Medusa-style tree: the top ``topk_per_depth[d]`` candidates under every node at depth d.

    E.g. (3, 2, 2) gives 3 + 6 + 12 = 21 nodes. Medusa's sparse trees (Cai et al. 2024, e.g. the
    63-node "mc_sim_7b_63" choices) are subsets of such products; pass their paths to
    ``Tree.from_paths`` or build a best tree from measured probabilities with ``best_tree``.
    """
    if any(t < 1 for t in topk_per_depth):
        raise SpecsimError(f"top-k per depth must be >= 1, got {list(topk_per_depth)}")
    parents: list[int] = []
    frontier = [-1]
    for topk in topk_per_depth:
        nxt = []
        for node in frontier:
            for _ in range(topk):
                parents.append(node)
                nxt.append(len(parents) - 1)
        frontier = nxt
    return Tree(tuple(parents))


def eagle2_tree(probs: ArrayLike, topk: int, depth: int, num_nodes: int) -> Tree:
    """An EAGLE-2-style tree (Li et al. 2024): expand the top-``topk`` nodes per layer, then rerank.

    Layer 1 is the root's top-k children. At each further layer the ``topk`` frontier nodes of
    highest path probability (EAGLE-2 uses the draft's confidence as its proxy) each get their
    top-k children. After ``depth`` layers the ``num_nodes`` candidates of highest path
    probability are kept (ancestors always rank at least as high). SGLang's
    ``--speculative-eagle-topk/--speculative-num-steps/--speculative-num-draft-tokens`` map to
    (topk, depth, num_draft_tokens - 1): its draft-token count includes the root.
    """
    if topk < 1 or depth < 0 or num_nodes < 0:
        raise SpecsimError("eagle2 tree needs topk >= 1, depth >= 0, num_nodes >= 0")
    pr = as_prob_matrix(probs, depth)
    if pr.ndim != 2:
        raise SpecsimError("eagle2_tree takes one acceptance profile of shape (depth, rank) or (rank,)")
    check_rank_monotone(pr)

    def prob(d: int, r: int) -> float:
        return float(pr[d - 1, r]) if d <= pr.shape[0] and r < pr.shape[1] else 0.0

    # candidates: (value, depth, parent candidate, rank)
    cands: list[tuple[float, int, int, int]] = []
    frontier = [(-1, 1.0)]  # (candidate index, value)
    for d in range(1, depth + 1):
        layer = []
        for parent, pv in frontier:
            for r in range(topk):
                cands.append((pv * prob(d, r), d, parent, r))
                layer.append((len(cands) - 1, cands[-1][0]))
        layer.sort(key=lambda c: (-c[1], c[0]))
        frontier = layer[:topk]
    order = sorted(range(len(cands)), key=lambda i: (-cands[i][0], cands[i][1], i))
    keep = sorted(order[:num_nodes], key=lambda i: (cands[i][1], i))
    kept = set(keep)
    remap: dict[int, int] = {}
    parents: list[int] = []
    for i in keep:
        parent = cands[i][2]
        if parent != -1 and parent not in kept:  # only with ties at probability 0; drop the orphan
            continue
        remap[i] = len(parents)
        parents.append(-1 if parent == -1 else remap[parent])
    return Tree(tuple(parents))


def eagle2_expected_tokens(probs: ArrayLike, topk: int, depth: int, num_nodes: int) -> FloatArray:
    """Expected tokens per step of ``eagle2_tree(probs, topk, depth, num_nodes)`` without building it.

    The kept nodes are the ``num_nodes`` candidates of largest path probability, so the expectation
    is 1 + their sum (Sequoia's F(T)). Vectorised over leading axes of ``probs`` (shape (..., D, R)):
    one call evaluates a whole grid of acceptance profiles, which is what fitting a catalogue of
    tree-measured means needs.
    """
    if topk < 1 or depth < 0 or num_nodes < 0:
        raise SpecsimError("eagle2 tree needs topk >= 1, depth >= 0, num_nodes >= 0")
    pr = check_rates(probs, "tree acceptance probability")
    if pr.ndim < 2:
        pr = np.repeat(pr[None, :], max(1, depth), axis=0)
    lead, (D, R) = pr.shape[:-2], pr.shape[-2:]
    width = np.zeros((*lead, max(D, depth), topk))
    width[..., :D, : min(R, topk)] = pr[..., :, :topk]
    frontier = np.ones((*lead, 1))
    layers = []
    for d in range(depth):
        # each frontier node's top-k children; the next frontier is the best topk of them
        values = (frontier[..., :, None] * width[..., d, None, :]).reshape(*lead, -1)
        layers.append(values)
        frontier = _largest(values, topk)
    if not layers or num_nodes == 0:
        return np.ones(lead)
    return 1.0 + _largest(np.concatenate(layers, axis=-1), num_nodes).sum(axis=-1)


def _largest(values: FloatArray, n: int) -> FloatArray:
    """The ``n`` largest values along the last axis, largest first: a partition, then a sort of those ``n`` only
    (the same values in the same order as a full descending sort, so sums over them are the same to the bit)."""
    if n >= values.shape[-1]:
        return -np.sort(-values, axis=-1)
    top = np.partition(values, values.shape[-1] - n, axis=-1)[..., values.shape[-1] - n:]
    return -np.sort(-top, axis=-1)


# Static trees published with the methods (node paths as sibling ranks, Medusa's "choices" format).
#: EAGLE-1 default tree: SafeAILab/EAGLE eagle/model/choices.py ``mc_sim_7b_63`` (25 nodes, depth 5).
EAGLE1_TREE_PATHS: tuple[tuple[int, ...], ...] = (
    (0,), (1,), (2,), (3,), (0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0), (2, 1), (3, 0), (0, 0, 0), (0, 0, 1),
    (0, 0, 2), (0, 1, 0), (0, 1, 1), (0, 2, 0), (0, 2, 1), (1, 0, 0), (0, 0, 0, 0), (0, 0, 0, 1), (0, 0, 0, 2),
    (0, 0, 0, 0, 0), (0, 0, 0, 0, 1))
#: Medusa's default sparse tree: FasterDecoding/Medusa medusa/model/medusa_choices.py ``mc_sim_7b_63``
#: (63 nodes + root = the 64-node tree of Cai et al. 2024, depth 4).
MEDUSA_TREE_PATHS: tuple[tuple[int, ...], ...] = (
    (0,), (0, 0), (1,), (0, 1), (2,), (0, 0, 0), (1, 0), (0, 2), (3,), (0, 3), (4,), (0, 4), (2, 0), (0, 5),
    (0, 0, 1), (5,), (0, 6), (6,), (0, 7), (0, 1, 0), (1, 1), (7,), (0, 8), (0, 0, 2), (3, 0), (0, 9), (8,), (9,),
    (1, 0, 0), (0, 2, 0), (1, 2), (0, 0, 3), (4, 0), (2, 1), (0, 0, 4), (0, 0, 5), (0, 0, 0, 0), (0, 1, 1),
    (0, 0, 6), (0, 3, 0), (5, 0), (1, 3), (0, 0, 7), (0, 0, 8), (0, 0, 9), (6, 0), (0, 4, 0), (1, 4), (7, 0),
    (0, 1, 2), (2, 0, 0), (3, 1), (2, 2), (8, 0), (0, 5, 0), (1, 5), (1, 0, 1), (0, 2, 1), (9, 0), (0, 6, 0),
    (0, 0, 0, 1), (1, 6), (0, 7, 0))


@cache
def static_tree(name: str) -> Tree:
    """A published static tree by name: ``eagle1`` (25 nodes) or ``medusa`` (63 nodes)."""
    paths = {"eagle1": EAGLE1_TREE_PATHS, "medusa": MEDUSA_TREE_PATHS}.get(name)
    if paths is None:
        raise SpecsimError(f"unknown static tree {name!r} (known: eagle1, medusa)")
    return Tree.from_paths(paths)

"""Best draft trees under Sequoia's positional acceptance model (Chen et al. 2024): the tree of n nodes with
the largest expected accepted length, its curve over n, and the size that best trades tokens per step
against the step's time."""

from __future__ import annotations

import heapq

import numpy as np
from numpy.typing import ArrayLike

from specsim.acceptance.trees import FloatArray, Tree, as_prob_matrix, check_rank_monotone
from specsim.errors import SpecsimError


def _best_nodes(probs: FloatArray, n: int, max_depth: int | None) -> list[tuple[float, int, int]]:
    """Greedy best-first selection: returns (path probability, parent index, rank) per node, in order.

    Optimality (Sequoia, Chen et al. 2024, under its positional acceptance assumption): a node's value is its
    path probability f(v) = f(parent) * probs[d, r]. With probs <= 1, f(child) <= f(parent); with
    probs non-increasing in rank, f(rank r) <= f(rank r-1). So the n nodes of largest f (ties
    broken by depth, then rank, so parents and older siblings come first) are closed under
    "parent" and "previous sibling", i.e. they form a valid tree; and no tree of n nodes can beat
    the sum of the n largest values. Best-first expansion from the root enumerates nodes in
    exactly that order, so the greedy tree is optimal, and the best tree of n+1 nodes extends the
    best tree of n (what makes ``best_tree_curve`` one pass). Sequoia's general DP is needed only
    without these monotonicities, which ``best_tree`` checks.
    """
    D, R = probs.shape
    limit = D if max_depth is None else min(D, max_depth)
    # heap of candidates: (-value, depth, rank, tie, parent index)
    heap: list[tuple[float, int, int, int, int]] = []
    tie = 0
    if limit >= 1 and R >= 1:
        heap.append((-probs[0, 0], 1, 0, tie, -1))
    chosen: list[tuple[float, int, int]] = []
    while heap and len(chosen) < n:
        negv, d, r, _, parent = heapq.heappop(heap)
        value = -negv
        if value <= 0:
            break
        idx = len(chosen)
        chosen.append((value, parent, r))
        # the next sibling becomes available, and the first child
        if r + 1 < R:
            parent_value = 1.0 if parent == -1 else chosen[parent][0]
            tie += 1
            heapq.heappush(heap, (-parent_value * probs[d - 1, r + 1], d, r + 1, tie, parent))
        if d < limit:
            tie += 1
            heapq.heappush(heap, (-value * probs[d, 0], d + 1, 0, tie, idx))
    return chosen


def best_tree(probs: ArrayLike, num_nodes: int, max_depth: int | None = None) -> Tree:
    """The tree of at most ``num_nodes`` nodes with the largest expected accepted length.

    ``probs`` as in ``Tree.path_probabilities`` (one profile: shape (D, R) or (R,); a 1-D vector
    applies at every depth up to ``max_depth``, default ``num_nodes``). Greedy on path
    probability, optimal under Sequoia's positional acceptance model (see ``_best_nodes``). Stops
    early if every remaining candidate has probability 0.
    """
    if num_nodes < 0:
        raise SpecsimError(f"number of tree nodes must be >= 0, got {num_nodes}")
    pr = as_prob_matrix(probs, max_depth or num_nodes)
    if pr.ndim != 2:
        raise SpecsimError("best_tree takes one acceptance profile of shape (depth, rank) or (rank,)")
    check_rank_monotone(pr)
    chosen = _best_nodes(pr, num_nodes, max_depth)
    return _by_depth(Tree(tuple(parent for _, parent, _ in chosen)))


def _by_depth(tree: Tree) -> Tree:
    """The same tree renumbered breadth-first (stable, so sibling ranks are kept)."""
    order = tree.topological_order
    new_index = {old: new for new, old in enumerate(order)}
    return Tree(tuple(-1 if tree.parents[old] == -1 else new_index[tree.parents[old]] for old in order))


def best_tree_curve(probs: ArrayLike, max_nodes: int, max_depth: int | None = None) -> FloatArray:
    """Expected tokens per step of the best tree of n nodes, for n = 0..max_nodes (one pass)."""
    pr = as_prob_matrix(probs, max_depth or max_nodes)
    if pr.ndim != 2:
        raise SpecsimError("best_tree_curve takes one acceptance profile of shape (depth, rank) or (rank,)")
    check_rank_monotone(pr)
    values = [v for v, _, _ in _best_nodes(pr, max_nodes, max_depth)]
    curve = 1.0 + np.concatenate([[0.0], np.cumsum(values)])
    # after the candidates run out (all remaining probability 0) the curve is flat
    return np.concatenate([curve, np.full(max_nodes + 1 - curve.size, curve[-1])])


def best_tree_for_budget(probs: ArrayLike, token_budget: int, batch: int = 1, max_depth: int | None = None) -> Tree:
    """The best tree whose verification pass fits ``batch * (n + 1) <= token_budget`` tokens."""
    if batch < 1:
        raise SpecsimError(f"batch must be >= 1, got {batch}")
    n = token_budget // batch - 1
    if n < 0:
        raise SpecsimError(f"a verification budget of {token_budget} tokens cannot hold batch {batch} x 1 root token")
    return best_tree(probs, n, max_depth)


def best_tree_size(probs: ArrayLike, step_time_s: ArrayLike, max_depth: int | None = None) -> int:
    """The n maximising (best tree's tokens per step) / step_time_s[n], n = 0..len-1.

    ``step_time_s[n]`` is the time of a speculative step with an n-node tree (draft + verify of
    n + 1 tokens per sequence), e.g. from the cost model; Sequoia's hardware-aware choice.
    """
    t = np.asarray(step_time_s, dtype=np.float64)
    if t.ndim != 1 or t.size == 0 or np.any(~(t > 0)):
        raise SpecsimError("step_time_s must be a non-empty 1-D array of positive times")
    curve = best_tree_curve(probs, t.size - 1, max_depth)
    return int(np.argmax(curve / t))

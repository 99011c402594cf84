"""Draft trees: shape, tree attention, positions, expected accepted length, best trees.

Convention (used everywhere in specsim): a tree of ``n`` draft nodes is a ``parents`` array of
length ``n``. ``parents[i] = -1`` means node ``i`` hangs directly under the *root*, the last
verified token (it is not a draft node and is not in the array); otherwise ``parents[i]`` is the
index of another draft node. Nodes may be listed in any order that forms a tree (no cycles, every
index in range); the array order is the flattened order of the verification pass. Among the
children of one node, *sibling rank* is their order of appearance (rank 0 = first listed = the
draft's top candidate).

A chain of ``k`` drafts is ``parents = [-1, 0, 1, ..., k-2]``. Verifying a tree of ``n`` nodes
feeds ``n + 1`` tokens per sequence to the target (the root token plus the drafts), exactly as a
chain of ``k`` feeds ``k + 1`` (seed chapter, "When speculation hurts").

Acceptance model (Sequoia, Chen et al. 2024, "positional acceptance"): ``probs[d-1, r]`` is the
probability that, given its parent was accepted, the child of sibling rank ``r`` at depth ``d`` is
the one accepted. Siblings are mutually exclusive, so each row sums to at most 1. A node is
accepted with its *path probability*, the product of ``probs`` along its root path, and
``E[tokens per step] = 1 + sum over nodes of path probability`` (the 1 is the residual or bonus
token). For a chain ``probs[d-1, 0] = alpha_d`` and this is the chain formula.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.acceptance.chain import acceptance_beta, check_rates, residual_distribution
from specsim.errors import SpecsimError

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass(frozen=True)
class Tree:
    """A draft tree of ``len(parents)`` nodes; see the module docstring for the convention."""

    parents: tuple[int, ...]

    def __post_init__(self) -> None:
        n = len(self.parents)
        for i, p in enumerate(self.parents):
            if isinstance(p, bool) or not isinstance(p, int | np.integer):
                raise SpecsimError(f"tree parents must be integers; node {i} has parent {p!r}")
            if p < -1 or p >= n:
                raise SpecsimError(
                    f"tree parents are not a tree: node {i} has parent {p}, allowed -1 (root) or 0..{n - 1}"
                )
            if p == i:
                raise SpecsimError(f"tree parents are not a tree: node {i} is its own parent")
        # cycle check: walk up from every node; a path longer than n means a cycle
        for i in range(n):
            j, steps = i, 0
            while j != -1:
                j = self.parents[j]
                steps += 1
                if steps > n:
                    raise SpecsimError(
                        f"tree parents are not a tree: node {i} is on a cycle (never reaches the root -1)"
                    )
        object.__setattr__(self, "parents", tuple(int(p) for p in self.parents))

    # basic shape -----------------------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        """Number of draft nodes n."""
        return len(self.parents)

    @property
    def num_verify_tokens(self) -> int:
        """Tokens per sequence in the verification pass: the n drafts plus the root token."""
        return self.num_nodes + 1

    @cached_property
    def depths(self) -> IntArray:
        """Depth of each node: 1 for children of the root."""
        d = np.zeros(self.num_nodes, dtype=np.int64)
        for i in range(self.num_nodes):
            j = i
            while j != -1:
                d[i] += 1
                j = self.parents[j]
        d.flags.writeable = False
        return d

    @property
    def depth(self) -> int:
        """The tree's depth: the longest root path (0 for an empty tree); = draft passes for EAGLE-style drafts."""
        return int(self.depths.max()) if self.num_nodes else 0

    @cached_property
    def ranks(self) -> IntArray:
        """Sibling rank of each node: its position among its parent's children (0 = first)."""
        seen: dict[int, int] = {}
        r = np.zeros(self.num_nodes, dtype=np.int64)
        for i, p in enumerate(self.parents):
            r[i] = seen.get(p, 0)
            seen[p] = r[i] + 1
        r.flags.writeable = False
        return r

    @cached_property
    def _children(self) -> tuple[tuple[int, ...], ...]:
        kids: list[list[int]] = [[] for _ in range(self.num_nodes + 1)]
        for i, p in enumerate(self.parents):
            kids[p + 1].append(i)
        return tuple(tuple(k) for k in kids)

    def children(self, node: int) -> tuple[int, ...]:
        """Indices of the children of ``node`` (-1 for the root) in sibling-rank order."""
        return self._children[node + 1]

    @cached_property
    def topological_order(self) -> tuple[int, ...]:
        """Node indices ordered so that every parent precedes its children."""
        return tuple(int(i) for i in np.argsort(self.depths, kind="stable"))

    def paths(self) -> list[tuple[int, ...]]:
        """Each node's root path as sibling ranks (Medusa's "choices" format), in node order."""
        out: list[tuple[int, ...]] = []
        for i in range(self.num_nodes):
            path: list[int] = []
            j = i
            while j != -1:
                path.append(int(self.ranks[j]))
                j = self.parents[j]
            out.append(tuple(reversed(path)))
        return out

    # what the verification pass needs ------------------------------------------------------
    def ancestor_matrix(self) -> NDArray[np.bool_]:
        """``M[i, j]`` is True iff node j is node i or one of its ancestors."""
        n = self.num_nodes
        m = np.eye(n, dtype=bool)
        for i in self.topological_order:
            p = self.parents[i]
            if p != -1:
                m[i] |= m[p]
        return m

    def attention_mask(self, include_root: bool = False) -> NDArray[np.int8]:
        """Tree attention mask (1 = may attend) over the flattened nodes, as in the seed's figure.

        Each node attends to itself and its ancestors, never to siblings or cousins; every node
        also sees the whole context (not shown). With ``include_root`` the root token is row and
        column 0 and everything attends to it.
        """
        m = self.ancestor_matrix().astype(np.int8)
        if not include_root:
            return m
        n = self.num_nodes
        full = np.zeros((n + 1, n + 1), dtype=np.int8)
        full[:, 0] = 1
        full[1:, 1:] = m
        return full

    def position_ids(self, first_position: int = 0) -> IntArray:
        """RoPE positions of the nodes: ``first_position + depth - 1``.

        ``first_position`` is the position of the first draft token (the root's position + 1).
        Nodes at the same depth share a position, as the seed chapter notes for a1 and b1.
        """
        return first_position + self.depths - 1

    # acceptance ------------------------------------------------------------------------------
    def path_probabilities(self, probs: ArrayLike) -> FloatArray:
        """P(node accepted) for each node: product of ``probs[depth-1, rank]`` along its root path.

        ``probs`` has shape ``(..., D, R)`` (leading axes broadcast, e.g. a sweep of profiles) or
        ``(R,)`` (the same sibling-rank vector at every depth, Sequoia's acceptance vector).
        Nodes deeper than D or of rank >= R have probability 0. Result shape ``(..., n)``.
        """
        pr = _as_prob_matrix(probs, self.depth)
        D, R = pr.shape[-2:]
        lead = pr.shape[:-2]
        out = np.zeros((*lead, self.num_nodes))
        for i in self.topological_order:
            d, r = int(self.depths[i]) - 1, int(self.ranks[i])
            own = pr[..., d, r] if (d < D and r < R) else np.zeros(lead)
            p = self.parents[i]
            out[..., i] = own if p == -1 else out[..., p] * own
        return out

    def expected_tokens(self, probs: ArrayLike) -> FloatArray:
        """Expected tokens per step ``1 + sum_v P(v accepted)`` (Sequoia, eq. for F(T))."""
        return 1.0 + self.path_probabilities(probs).sum(axis=-1)

    # constructors ----------------------------------------------------------------------------
    @classmethod
    def from_parents(cls, parents: Sequence[int]) -> Tree:
        """A tree from a parents list (validated)."""
        return cls(tuple(parents))

    @classmethod
    def from_paths(cls, paths: Sequence[Sequence[int]]) -> Tree:
        """A tree from root paths given as sibling ranks (Medusa "choices", e.g. ``[[0], [0, 1]]``).

        Every prefix of a path must itself be listed, and a rank-r entry needs ranks 0..r-1 of the
        same parent; nodes are ordered by (depth, path) as Medusa does.
        """
        norm = sorted({tuple(int(x) for x in p) for p in paths}, key=lambda p: (len(p), p))
        index: dict[tuple[int, ...], int] = {}
        parents: list[int] = []
        for path in norm:
            if not path or min(path) < 0:
                raise SpecsimError(f"tree path {list(path)} must be a non-empty list of ranks >= 0")
            prefix = path[:-1]
            if prefix and prefix not in index:
                raise SpecsimError(f"tree path {list(path)} has no parent path {list(prefix)}")
            if path[-1] > 0 and (*prefix, path[-1] - 1) not in index:
                raise SpecsimError(f"tree path {list(path)} lacks its previous sibling")
            index[path] = len(parents)
            parents.append(index[prefix] if prefix else -1)
        return cls(tuple(parents))


def _as_prob_matrix(probs: ArrayLike, depth: int = 1) -> FloatArray:
    """probs as (..., D, R); a 1-D sibling-rank vector is repeated for ``depth`` depths."""
    pr = check_rates(probs, "tree acceptance probability")
    if pr.ndim == 1:
        pr = np.repeat(pr[None, :], max(1, depth), axis=0)
    if pr.ndim < 2 or pr.shape[-1] == 0:
        raise SpecsimError("tree acceptance probabilities need shape (depth, rank) or (rank,)")
    if np.any(pr.sum(axis=-1) > 1.0 + 1e-9):
        raise SpecsimError(
            "tree acceptance probabilities by sibling rank must sum to <= 1 at each depth "
            "(siblings are mutually exclusive)"
        )
    return pr


# ---------------------------------------------------------------------------------------------
# acceptance probabilities by sibling rank
# ---------------------------------------------------------------------------------------------


def sibling_probs_independent(depth_rates: ArrayLike, max_rank: int) -> FloatArray:
    """``probs[d, r] = a_d (1 - a_d)^r``: each candidate independently passes with the depth's rate.

    An approximation (a real multi-candidate rule updates the residual after each rejection; see
    ``sibling_probs_multicandidate``); used when only chain rates are known. Rank 0 equals the
    chain rate, so a chain evaluates exactly as the chain formula.
    """
    a = check_rates(depth_rates)[..., :, None]
    r = np.arange(max_rank)[None, :]
    return a * (1.0 - a) ** r


def sibling_probs_multicandidate(p: ArrayLike, q: ArrayLike, max_rank: int) -> FloatArray:
    """Sibling-rank acceptance vector for SpecInfer's multi-candidate rule with i.i.d. candidates.

    Candidates are drawn independently from ``q``. Candidate r is tried only if 0..r-1 were
    rejected, against the residual ``p_r`` (``p_0 = p``, ``p_{r+1} = norm(max(0, p_r - q))``), and
    is accepted with probability ``beta_r = sum min(p_r, q)`` (Miao et al. 2023, SpecInfer,
    multi-step speculative sampling). Returns ``P(rank r is the accepted one)`` for r < max_rank;
    the residual sequence does not depend on which token was rejected, so this is exact when p
    and q are the same at every node (e.g. the circulant toy models of ``specsim.reference``).
    """
    pr = np.asarray(p, dtype=np.float64)
    qa = np.asarray(q, dtype=np.float64)
    out = np.zeros(max_rank)
    reach = 1.0
    for r in range(max_rank):
        beta = float(acceptance_beta(pr, qa))
        out[r] = reach * beta
        reach *= 1.0 - beta
        if reach <= 0:
            break
        pr = residual_distribution(pr, qa)
    return out


#: Sibling-rank decay of the acceptance hazard (``sibling_probs_hazard``). 0.6 reproduces EAGLE's
#: static 25-node tree from its own chain on the same head (Li et al. 2024, EAGLE, Table 5 chain-5
#: tau 3.20 and Table 2 tree tau 3.94, Vicuna-7B, MT-bench, T=0: 3.96 with 0.6). Independent checks:
#: Medusa head-1 top-5 accuracy 0.78 against top-1 0.56 (FasterDecoding/Medusa assets/medusa_acc.csv)
#: implies 0.55; Sequoia's acceptance-rate vector (0.634, 0.108, 0.057, ...) implies about 0.5.
SIBLING_HAZARD_DECAY = 0.6


def sibling_probs_hazard(depth_rates: ArrayLike, max_rank: int, decay: float = SIBLING_HAZARD_DECAY) -> FloatArray:
    """``probs[d, r]``: rank r is tried only when ranks < r failed, and then passes with ``a_d decay^r``.

    The hazard model behind specsim's chain <-> tree conversion: rank 0 passes with the chain rate
    ``a_d`` (so a chain evaluates exactly as the chain formula), and each further sibling is less
    likely to be the target's token than the one before: ``P(rank r) = h_r prod_{j<r} (1 - h_j)`` with
    ``h_r = a_d decay^r``. ``decay = 1`` is ``sibling_probs_independent``. Leading axes broadcast.
    """
    if not 0.0 <= decay <= 1.0:
        raise SpecsimError(f"sibling hazard decay must lie in [0, 1], got {decay:g}")
    a = check_rates(depth_rates)[..., :, None]
    hazard = a * decay ** np.arange(max_rank)
    survive = np.cumprod(1.0 - hazard, axis=-1)
    before = np.concatenate([np.ones((*survive.shape[:-1], 1)), survive[..., :-1]], axis=-1)
    return hazard * before


# ---------------------------------------------------------------------------------------------
# best trees
# ---------------------------------------------------------------------------------------------


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


def _check_rank_monotone(pr: FloatArray) -> None:
    if np.any(np.diff(pr, axis=-1) > 1e-12):
        raise SpecsimError(
            "best-tree search needs acceptance probabilities non-increasing in sibling rank "
            "(rank 0 = the draft's top candidate)"
        )


def best_tree(probs: ArrayLike, num_nodes: int, max_depth: int | None = None) -> Tree:
    """The tree of at most ``num_nodes`` nodes with the largest expected accepted length.

    ``probs`` as in ``Tree.path_probabilities`` (one profile: shape (D, R) or (R,); a 1-D vector
    applies at every depth up to ``max_depth``, default ``num_nodes``). Greedy on path
    probability, optimal under Sequoia's positional acceptance model (see ``_best_nodes``). Stops
    early if every remaining candidate has probability 0.
    """
    if num_nodes < 0:
        raise SpecsimError(f"number of tree nodes must be >= 0, got {num_nodes}")
    pr = _as_prob_matrix(probs, max_depth or num_nodes)
    if pr.ndim != 2:
        raise SpecsimError("best_tree takes one acceptance profile of shape (depth, rank) or (rank,)")
    _check_rank_monotone(pr)
    chosen = _best_nodes(pr, num_nodes, max_depth)
    return _by_depth(Tree(tuple(parent for _, parent, _ in chosen)))


def _by_depth(tree: Tree) -> Tree:
    """The same tree renumbered breadth-first (stable, so sibling ranks are kept)."""
    order = tree.topological_order
    new_index = {old: new for new, old in enumerate(order)}
    return Tree(tuple(-1 if tree.parents[old] == -1 else new_index[tree.parents[old]] for old in order))


def best_tree_curve(probs: ArrayLike, max_nodes: int, max_depth: int | None = None) -> FloatArray:
    """Expected tokens per step of the best tree of n nodes, for n = 0..max_nodes (one pass)."""
    pr = _as_prob_matrix(probs, max_depth or max_nodes)
    if pr.ndim != 2:
        raise SpecsimError("best_tree_curve takes one acceptance profile of shape (depth, rank) or (rank,)")
    _check_rank_monotone(pr)
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


# ---------------------------------------------------------------------------------------------
# standard shapes
# ---------------------------------------------------------------------------------------------


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
    pr = _as_prob_matrix(probs, depth)
    if pr.ndim != 2:
        raise SpecsimError("eagle2_tree takes one acceptance profile of shape (depth, rank) or (rank,)")
    _check_rank_monotone(pr)

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
        frontier = -np.sort(-values, axis=-1)[..., :topk]
    if not layers or num_nodes == 0:
        return np.ones(lead)
    allv = -np.sort(-np.concatenate(layers, axis=-1), axis=-1)
    return 1.0 + allv[..., :num_nodes].sum(axis=-1)


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


# ---------------------------------------------------------------------------------------------
# tree files
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TreeSpec:
    """A tree read from a file, with optional acceptance probabilities by (depth, rank)."""

    tree: Tree
    probs: FloatArray | None = None
    source: str = ""


def load_tree(path: str | Path) -> TreeSpec:
    """Read ``{parents: [...]}`` (or ``{paths: [[0], [0, 1], ...]}``) from YAML or JSON.

    Optional ``acceptance``: a list of lists, ``acceptance[d][r]`` = P(rank-r child at depth d+1 is
    accepted | parent accepted), or one list used at every depth.
    """
    from specsim.files import read_structured  # refuses folders, binary, non-UTF-8 and deeply nested files

    p = Path(path)
    if not p.exists():
        raise SpecsimError(f"{p}: no such tree file")
    data = read_structured(p)
    if isinstance(data, list):
        data = {"parents": data}
    if not isinstance(data, dict) or not ({"parents", "paths"} & set(data)):
        raise SpecsimError(f"{p}: a tree file needs a 'parents' list (or 'paths')")
    try:
        if "parents" in data:
            raw = data["parents"]
            if not isinstance(raw, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in raw):
                raise SpecsimError("'parents' must be a list of integers (-1 = root)")
            tree = Tree.from_parents(raw)
        else:
            tree = Tree.from_paths(data["paths"])
        probs = None
        if data.get("acceptance") is not None:
            probs = np.asarray(data["acceptance"], dtype=np.float64)
            _as_prob_matrix(probs)  # validate; a 1-D vector stays 1-D (applies at every depth)
    except SpecsimError as exc:
        raise SpecsimError(f"{p}: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise SpecsimError(f"{p}: bad tree data: {exc}") from None
    return TreeSpec(tree, probs, str(p))

"""Draft trees: shape, tree attention, positions, expected accepted length.

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

Beside this module: sibling-rank probabilities from chain rates (sibling_probs.py), best trees
(tree_search.py), standard and published shapes (tree_shapes.py), tree files (tree_files.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.acceptance.chain import check_rates
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
        return int(np.max(self.depths)) if self.num_nodes else 0

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
        pr = as_prob_matrix(probs, self.depth)
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


def as_prob_matrix(probs: ArrayLike, depth: int = 1) -> FloatArray:
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


def check_rank_monotone(pr: FloatArray) -> None:
    """SpecsimError unless ``pr`` is non-increasing in sibling rank (what best-first search and EAGLE-2's
    reranking assume)."""
    if np.any(np.diff(pr, axis=-1) > 1e-12):
        raise SpecsimError(
            "best-tree search needs acceptance probabilities non-increasing in sibling rank "
            "(rank 0 = the draft's top candidate)"
        )

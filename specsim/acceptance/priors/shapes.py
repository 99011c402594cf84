"""How a step drafts and verifies (``Shape``), and the expected tokens per step of per-depth rates in it.

Every prior describes ``MAX_DEPTH`` conditional per-depth rates ``c_1..c_32`` (``c_i`` = P(draft i
accepted | drafts 1..i-1 accepted)); ``tau_of`` evaluates them in a chain, a parallel block or a
tree (siblings by the hazard model ``trees.sibling_probs_hazard``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from specsim.acceptance.sibling_probs import sibling_probs_hazard
from specsim.acceptance.tree_shapes import chain, eagle2_expected_tokens, eagle2_tree, static_tree
from specsim.acceptance.trees import Tree
from specsim.errors import SpecsimError

FloatArray = NDArray[np.float64]

#: Positions every prior describes (past the measured depth by the stated decay model).
MAX_DEPTH = 32
#: No draft position is accepted with certainty; per-position conditional rates are capped here.
RATE_CAP = 0.98


@dataclass(frozen=True)
class Shape:
    """How a step drafts and verifies: a chain of ``depth``, a parallel block of ``depth`` drafted in
    one pass (acceptance as a chain), or a tree of ``depth`` levels (a published static tree, or a
    dynamic EAGLE-2 / SGLang tree that expands ``topk`` per level and verifies ``nodes`` drafts,
    root excluded). ``assumed`` says what the source did not state and what was used instead."""

    kind: str  # chain | parallel | tree
    depth: int
    topk: int = 1
    nodes: int | None = None
    static: str = ""  # eagle1 | medusa for the published static trees
    assumed: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ("chain", "parallel", "tree"):
            raise SpecsimError(f"shape kind must be chain, parallel or tree, got {self.kind!r}")
        if self.depth < 0:
            raise SpecsimError(f"shape depth must be >= 0, got {self.depth}")

    @property
    def is_tree(self) -> bool:
        return self.kind == "tree"

    @property
    def num_nodes(self) -> int:
        """Draft tokens verified per sequence (root excluded)."""
        if self.static:
            return static_tree(self.static).num_nodes
        if self.is_tree:
            return int(self.nodes if self.nodes is not None else self.topk * self.depth)
        return self.depth

    def label(self) -> str:
        if self.static:
            return f"{self.static} static tree ({self.num_nodes} nodes, depth {self.depth})"
        if self.is_tree:
            return f"tree topk {self.topk}, depth {self.depth}, {self.num_nodes} nodes"
        return f"{self.kind} of {self.depth}"

    def tree(self, rates: Sequence[float]) -> Tree:
        """The tree this shape verifies, for conditional per-depth ``rates`` (a chain for chains)."""
        if not self.is_tree:
            return chain(self.depth)
        if self.static:
            return static_tree(self.static)
        probs = sibling_probs_hazard(np.asarray(rates[: self.depth], dtype=float), self.topk)
        return eagle2_tree(probs, self.topk, self.depth, self.num_nodes)


def chain_shape(k: int) -> Shape:
    return Shape("chain", int(k))


#: The published static trees: EAGLE's 25-node tree and Medusa's 63-node tree (mc_sim_7b_63).
EAGLE1_TREE = Shape("tree", 5, 4, 25, static="eagle1")
MEDUSA_TREE = Shape("tree", 4, 10, 63, static="medusa")
#: EAGLE repo evaluation defaults for the EAGLE-3 paper's dynamic tree: EaModel.from_pretrained
#: total_token = 60 (59 drafts + root), depth = 7 (= 8 draft layers; "depth = max draft length - 1"
#: in eagle/evaluation/gen_ea_answer_llama3chat.py), top_k = 10 (SafeAILab/EAGLE ea_model.py). Depth 8
#: is also what the paper's taus require (7.54 on HumanEval needs more than 6.54 draft positions).
EAGLE3_PAPER_TREE = Shape("tree", 8, 10, 59, assumed="EAGLE repo defaults for the EAGLE-3 paper's dynamic tree: "
                           "60 total tokens, 8 draft layers, top-10 (SafeAILab/EAGLE ea_model.py)")
EAGLE2_PAPER_TREE = Shape("tree", 6, 10, 59, assumed="EAGLE-2 App. A: 60 total tokens, depth 6, 10 expanded")


def as_shape(shape: Any) -> Shape:
    """A ``Shape`` from an int (chain k), a Shape, a Tree (fixed tree, evaluated as given) or a mapping."""
    if isinstance(shape, Shape):
        return shape
    if isinstance(shape, bool):
        raise SpecsimError(f"shape must be k, a Shape, a Tree or a mapping, got {shape!r}")
    if isinstance(shape, int | np.integer):
        return chain_shape(int(shape))
    if isinstance(shape, Mapping):
        depth = shape.get("depth", shape.get("k"))
        if depth is None:
            raise SpecsimError(f"shape mapping needs 'depth' (or 'k'), got {dict(shape)!r}")
        topk = int(shape.get("topk") or 1)
        nodes = shape.get("num_draft_tokens", shape.get("nodes"))
        kind = str(shape.get("kind") or ("tree" if topk > 1 else "chain"))
        return Shape(kind, int(depth), topk, None if nodes is None else int(nodes))
    raise SpecsimError(f"shape must be k, a Shape, a Tree or a mapping, got {shape!r}")


def tau_of(rates: Sequence[float] | FloatArray, shape: Shape | Tree | int) -> float:
    """Expected tokens per step (bonus included) of conditional per-depth ``rates`` in ``shape``."""
    r = np.asarray(rates, dtype=float)
    if isinstance(shape, Tree):
        if shape.num_nodes == 0:
            return 1.0
        ranks = int(np.max(shape.ranks)) + 1
        return float(shape.expected_tokens(sibling_probs_hazard(r[: shape.depth], ranks)))
    s = as_shape(shape)
    if s.depth > r.size:
        raise SpecsimError(f"depth {s.depth} exceeds the {r.size} positions this prior describes")
    if not s.is_tree:
        return float(1.0 + np.cumprod(r[: s.depth]).sum())  # chain formula (seed chapter)
    if s.static:
        return tau_of(r, static_tree(s.static))
    return _dynamic_tree_tau(tuple(r[: s.depth].tolist()), s.topk, s.depth, s.num_nodes)


@functools.lru_cache(maxsize=65536)
def _dynamic_tree_tau(rates: tuple[float, ...], topk: int, depth: int, nodes: int) -> float:
    """tau of EAGLE-2's dynamic tree over sibling-hazard probabilities; memoised (pure in its arguments): the
    catalogue's lookups ask for the same entry's tree over and over."""
    probs = sibling_probs_hazard(np.asarray(rates, dtype=float), topk)
    return float(eagle2_expected_tokens(probs, topk, depth, nodes))


def tau_grid(rates: FloatArray, shape: Shape) -> FloatArray:
    """tau for a stack of rate vectors (leading axis), vectorised (the fitting grid)."""
    if not shape.is_tree:
        return 1.0 + np.cumprod(rates[:, : shape.depth], axis=-1).sum(axis=-1)
    if shape.static:
        tree = static_tree(shape.static)
        ranks = int(np.max(tree.ranks)) + 1
        return np.asarray(tree.expected_tokens(sibling_probs_hazard(rates[:, : tree.depth], ranks)))
    probs = sibling_probs_hazard(rates[:, : shape.depth], shape.topk)
    return np.asarray(eagle2_expected_tokens(probs, shape.topk, shape.depth, shape.num_nodes))


def shift(rates: FloatArray, delta: float | FloatArray) -> FloatArray:
    """Rates moved by ``delta`` in logit space: every position up or down together, never past 0 or 1."""
    r = np.clip(rates, 1e-6, 1.0 - 1e-6)
    return np.clip(1.0 / (1.0 + np.exp(-(np.log(r / (1.0 - r)) + delta))), 0.0, RATE_CAP)


def scale_to(rates: FloatArray, ratio: float, ref: Shape) -> FloatArray:
    """Rates shifted together (logit space) so that (tau - 1) in ``ref`` changes by ``ratio``.

    A common logit shift keeps the decay shape and, unlike a multiplicative scale, can raise rates
    that are already high without crossing 1. tau is evaluated for a grid of shifts in one vectorised
    call and inverted by interpolation (it increases with the shift); ratios beyond the cap stop there."""
    if abs(ratio - 1.0) < 1e-12:
        return rates
    target = ratio * (tau_of(rates, ref) - 1.0)
    curve = _shift_curve(tuple(np.asarray(rates, dtype=float).tolist()), ref)
    return shift(rates, float(np.interp(target, curve, _DELTAS)))


_DELTAS = np.linspace(-10.0, 10.0, 801)


@functools.lru_cache(maxsize=4096)
def _shift_curve(rates: tuple[float, ...], ref: Shape) -> FloatArray:
    """tau - 1 in ``ref`` of ``rates`` shifted by each of _DELTAS; memoised (pure in its arguments): a lookup
    scales the same entry's rates to several ratios (its central value and its band's ends)."""
    curve = tau_grid(shift(np.asarray(rates)[None, :], _DELTAS[:, None]), ref) - 1.0
    curve.flags.writeable = False
    return curve

"""Per-request chain acceptance from a workload mix, and the sampling of accepted draft tokens.

Each request belongs to one workload class (drawn by the class shares). A class gives per-position
conditional acceptance rates alpha_1, alpha_2, ...: draft token i is accepted given tokens 1..i-1 were.
For a chain of k drafted tokens the number accepted A satisfies P(A >= i) = prod_{j<=i} alpha_j for
i <= k (Leviathan et al. 2023, sec. 3.4 with position-dependent rates; Li et al. 2024, EAGLE-2), so with
one uniform u per request and step, A = #{i <= k : u < prod_{j<=i} alpha_j}. A decode step emits 1 + A
tokens (the verified prefix plus the target's own token).

A draft tree is sampled the same way, from the survival of its accepted depth: siblings at one depth are
mutually exclusive, so P(accepted depth >= d) = sum of the path probabilities of the tree's nodes at depth d
(Sequoia, Chen et al. 2024; trees.py's convention), and its conditional rates are S_d / S_(d-1). The tree is
EAGLE-2's for the class's own chain rates (`Draft.tree`: sibling ranks by the hazard model, the `nodes` best
candidates of a depth-`depth`, top-`topk` expansion), so 1 + sum_d S_d is the tree's expected tokens per step
(`Draft.tokens_per_step`) for each class.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from specsim.acceptance.priors import task_of_dataset
from specsim.acceptance.sibling_probs import sibling_probs_hazard
from specsim.acceptance.tree_shapes import eagle2_tree
from specsim.errors import SpecsimError

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class WorkloadClass:
    """A share of the requests with per-position conditional acceptance rates (the last one repeats)."""

    name: str
    share: float
    alphas: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.share > 0:
            raise SpecsimError(f"workload '{self.name}': field 'share' must be > 0, got {self.share!r}")
        if not self.alphas or any(not 0.0 <= a <= 1.0 for a in self.alphas):
            raise SpecsimError(f"workload '{self.name}': field 'alphas' must be a non-empty list of rates in "
                               f"[0, 1], got {list(self.alphas)!r}")

    def conditional(self, k: int) -> FloatArray:
        """alpha_1..alpha_k (the last given rate repeats past the list's end)."""
        a = np.asarray(self.alphas, dtype=np.float64)
        return np.concatenate([a, np.full(max(0, k - len(a)), a[-1])])[:k]


@dataclass(frozen=True)
class Workload:
    """A share of the traffic as a scenario describes it, before a draft is chosen: explicit per-position
    `alphas`, a `task` whose sourced prior is looked up for the simulated draft (advise/planner.py), or
    neither (the draft's own acceptance, measured or its prior)."""

    name: str
    share: float
    alphas: tuple[float, ...] | None = None
    task: str | None = None

    def __post_init__(self) -> None:
        if not self.share > 0:
            raise SpecsimError(f"workload '{self.name}': field 'share' must be > 0, got {self.share!r}")
        if self.alphas is not None:
            WorkloadClass(self.name, self.share, self.alphas)  # the same checks
        if self.task is not None and task_of_dataset(self.task) is None:
            raise SpecsimError(f"workload '{self.name}': field 'task' must be a known task, got {self.task!r}")

    def resolved(self) -> WorkloadClass | None:
        """The class when its rates are given (None: they depend on the draft)."""
        return None if self.alphas is None else WorkloadClass(self.name, self.share, self.alphas)


@dataclass(frozen=True)
class AcceptanceMix:
    """Workload classes and their shares (normalised when used)."""

    classes: tuple[WorkloadClass, ...]

    def __post_init__(self) -> None:
        if not self.classes:
            raise SpecsimError("acceptance mix: at least one workload class is needed")

    @classmethod
    def constant(cls, alpha: float) -> AcceptanceMix:
        """Every request, every position: acceptance alpha."""
        return cls((WorkloadClass("all", 1.0, (alpha,)),))

    @property
    def shares(self) -> FloatArray:
        s = np.asarray([c.share for c in self.classes], dtype=np.float64)
        out: FloatArray = s / s.sum()
        return out

    def survival(self, k: int) -> FloatArray:
        """S[c, i-1] = P(A >= i) = prod_{j<=i} alpha_{c,j} for i = 1..k, one row per class."""
        if k == 0:
            return np.zeros((len(self.classes), 0))
        return np.cumprod(np.stack([c.conditional(k) for c in self.classes]), axis=1, dtype=np.float64)

    def expected_accepted(self, k: int) -> FloatArray:
        """E[A] per class at draft length k: sum_i P(A >= i) (without the output-length cap)."""
        out: FloatArray = self.survival(k).sum(axis=1)
        return out

    def as_tree(self, topk: int, depth: int, nodes: int) -> AcceptanceMix:
        """The mix drafting an EAGLE-2 tree of `nodes` nodes, `depth` deep, `topk` wide per level (module
        docstring): each class's conditional rates of its accepted depth, zero past the tree's depth."""
        return AcceptanceMix(tuple(WorkloadClass(c.name, c.share, tree_rates(c.conditional(depth), topk, depth, nodes))
                                   for c in self.classes))

    def assign(self, n: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        """A class index for each of n requests, drawn by the shares."""
        if len(self.classes) == 1:
            return np.zeros(n, dtype=np.int64)
        return np.searchsorted(np.cumsum(self.shares)[:-1], rng.random(n), side="right").astype(np.int64)


def tree_rates(rates: FloatArray, topk: int, depth: int, nodes: int) -> tuple[float, ...]:
    """Conditional rates S_d / S_(d-1) of the accepted depth of the EAGLE-2 tree built from chain `rates` (module
    docstring), d = 1..depth, then a 0 (nothing is accepted past the tree)."""
    probs = sibling_probs_hazard(np.clip(np.asarray(rates, dtype=np.float64)[:depth], 0.0, 1.0), topk)
    tree = eagle2_tree(probs, topk, depth, nodes)
    survival = np.bincount(tree.depths - 1, weights=tree.path_probabilities(probs), minlength=depth)[:depth]
    before = np.concatenate([[1.0], survival[:-1]])
    with np.errstate(invalid="ignore", divide="ignore"):
        cond = np.where(before > 0, survival / before, 0.0)
    return (*(float(x) for x in np.clip(cond, 0.0, 1.0)), 0.0)


def sample_accepted(u: FloatArray, survival_rows: FloatArray, k: int) -> npt.NDArray[np.int64]:
    """Accepted draft tokens per request: A = #{i <= k : u < S_i}, so P(A >= i) = S_i (u uniform on [0, 1))."""
    if k == 0:
        return np.zeros(len(u), dtype=np.int64)
    return np.asarray((u[:, None] < survival_rows[:, :k]).sum(axis=1), dtype=np.int64)

"""The reference: exact, seeded, deliberately plain speculative sampling on toy Markov-chain LMs.

This is the slow oracle the fast formulas are tested against. It follows the seed chapter's
algorithm step by step (draft k tokens from q; one "target pass" gives k+1 distributions; accept
draft i with probability min(1, p_i/q_i); on rejection emit a sample of the residual
norm(max(0, p - q)) and stop; if all pass, emit a bonus token from p_{k+1}), which is Leviathan et
al. 2022, Algorithm 1. Tree verification uses SpecInfer's multi-candidate rule (Miao et al. 2023,
"multi-step speculative sampling"): the children of an accepted node are tried in rank order, each
accepted with min(1, p(x)/q(x)) against the current residual p; after a rejection
p <- norm(max(0, p - q)); if every child is rejected a token is sampled from that residual.

A "language model" here is a Markov chain over a tiny vocabulary: ``table[s]`` is the next-token
distribution after token ``s``. A draft may be one table for every position, or a list of tables,
one per draft position (depth), which models Medusa-style heads whose quality decays with depth.
All randomness comes from an explicitly passed ``numpy.random.Generator``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.acceptance.trees import Tree
from specsim.errors import SpecsimError

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
Residual = Callable[[FloatArray, FloatArray], FloatArray]


@dataclass(frozen=True)
class MarkovLM:
    """A toy LM: ``table[s, x]`` = P(next token = x | previous token = s)."""

    table: FloatArray

    def __post_init__(self) -> None:
        t = np.asarray(self.table, dtype=np.float64)
        if t.ndim != 2 or t.shape[0] != t.shape[1]:
            raise SpecsimError("a Markov LM table must be square (V x V)")
        if np.any(t < 0) or np.any(np.abs(t.sum(axis=1) - 1.0) > 1e-9):
            raise SpecsimError("each row of a Markov LM table must be a probability distribution")
        object.__setattr__(self, "table", t)

    @property
    def vocab_size(self) -> int:
        return int(self.table.shape[0])

    def next_dist(self, prev: int) -> FloatArray:
        return self.table[prev]


Draft = MarkovLM | Sequence[MarkovLM]


def _draft_at(draft: Draft, position: int) -> MarkovLM:
    """The draft table used at draft position/depth ``position`` (1-based)."""
    if isinstance(draft, MarkovLM):
        return draft
    if position > len(draft):
        raise SpecsimError(f"draft has tables for {len(draft)} positions, asked for position {position}")
    return draft[position - 1]


# ---------------------------------------------------------------------------------------------
# toy models
# ---------------------------------------------------------------------------------------------


def random_markov_lm(vocab_size: int, sharpness: float, rng: np.random.Generator) -> MarkovLM:
    """Rows are softmax(sharpness * standard normal) (the seed chapter's ``random_chain``)."""
    logits = rng.standard_normal((vocab_size, vocab_size)) * sharpness
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return MarkovLM(e / e.sum(axis=1, keepdims=True))


def mixture(a: MarkovLM, b: MarkovLM, weight_a: float) -> MarkovLM:
    """``weight_a * a + (1 - weight_a) * b`` (the seed's "decent but imperfect draft")."""
    return MarkovLM(weight_a * a.table + (1.0 - weight_a) * b.table)


def circulant_lm(base: ArrayLike) -> MarkovLM:
    """``table[s, x] = base[(x - s) mod V]``: every row is the same distribution, shifted.

    A target and a draft built from the same shift have the same overlap ``sum min(p, q)`` in every
    state, so acceptance does not depend on the context: the i.i.d. model holds *exactly*.
    """
    b = np.asarray(base, dtype=np.float64)
    V = b.size
    idx = (np.arange(V)[None, :] - np.arange(V)[:, None]) % V
    return MarkovLM(b[idx])


def draft_base_with_beta(p: ArrayLike, beta: float) -> FloatArray:
    """A draft distribution q with ``sum min(p, q) = beta`` exactly.

    Moves mass ``1 - beta`` onto the least likely token j: ``q(x) = (1 - t) p(x)`` for x != j and
    ``q(j) = p(j) + t (1 - p(j))`` with ``t = (1 - beta) / (1 - p(j))``; needs ``p(j) <= beta``.
    """
    pa = np.asarray(p, dtype=np.float64)
    j = int(np.argmin(pa))
    if not (0.0 <= beta <= 1.0) or pa[j] > beta:
        raise SpecsimError(f"cannot build a draft with beta={beta:g} for this p (min p = {pa[j]:g})")
    t = (1.0 - beta) / (1.0 - pa[j])
    q = (1.0 - t) * pa
    q[j] = pa[j] + t * (1.0 - pa[j])
    return q


def circulant_pair(
    vocab_size: int, betas: float | Sequence[float], rng: np.random.Generator, sharpness: float = 1.0
) -> tuple[MarkovLM, MarkovLM | list[MarkovLM]]:
    """A (target, draft) pair of circulant toy LMs whose acceptance is exactly ``betas``.

    A float gives one draft table (i.i.d. acceptance alpha); a list gives one draft table per
    draft position with conditional acceptance ``betas[i]`` at position i+1.
    """
    logits = rng.standard_normal(vocab_size) * sharpness
    p = np.exp(logits - np.max(logits))
    p /= p.sum()
    target = circulant_lm(p)
    if isinstance(betas, int | float):
        return target, circulant_lm(draft_base_with_beta(p, float(betas)))
    return target, [circulant_lm(draft_base_with_beta(p, float(b))) for b in betas]


# ---------------------------------------------------------------------------------------------
# sampling primitives
# ---------------------------------------------------------------------------------------------


def _sample(dist: FloatArray, rng: np.random.Generator) -> int:
    """One draw from a (possibly unnormalised) distribution by inverse CDF."""
    cdf = np.cumsum(dist)
    i = int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))
    return min(i, dist.size - 1)


def plain_residual(p: FloatArray, q: FloatArray) -> FloatArray:
    """norm(max(0, p - q)), the seed chapter's residual distribution."""
    res = np.maximum(p - q, 0.0)
    total = res.sum()
    return res / total if total > 0 else p


# ---------------------------------------------------------------------------------------------
# one speculative step
# ---------------------------------------------------------------------------------------------


def chain_step(
    target: MarkovLM,
    draft: Draft,
    prev: int,
    k: int,
    rng: np.random.Generator,
    greedy: bool = False,
    residual: Residual = plain_residual,
) -> list[int]:
    """One draft-verify step of length k from token ``prev``; returns the emitted tokens (1..k+1).

    Greedy: the draft proposes its argmax, a draft is accepted iff it equals the target's argmax,
    and a rejection emits the target's argmax (the seed chapter's greedy reduction).
    ``residual`` exists so that tests can break the algorithm on purpose.
    """
    # 1) draft k tokens autoregressively from q, keeping the q distributions
    drafts: list[int] = []
    q_dists: list[FloatArray] = []
    ctx = prev
    for i in range(1, k + 1):
        q = _draft_at(draft, i).next_dist(ctx)
        x = int(np.argmax(q)) if greedy else _sample(q, rng)
        drafts.append(x)
        q_dists.append(q)
        ctx = x
    # 2) one "target pass": k+1 distributions
    p_dists = [target.next_dist(c) for c in [prev, *drafts]]
    # 3) accept / reject left to right
    out: list[int] = []
    for i, x in enumerate(drafts):
        p, q = p_dists[i], q_dists[i]
        if greedy:
            best = int(np.argmax(p))
            if x == best:
                out.append(x)
                continue
            out.append(best)
            return out
        if rng.random() < min(1.0, p[x] / q[x]):
            out.append(x)
            continue
        out.append(_sample(residual(p, q), rng))
        return out
    # 4) bonus token
    p = p_dists[k]
    out.append(int(np.argmax(p)) if greedy else _sample(p, rng))
    return out


def tree_step(
    target: MarkovLM,
    draft: Draft,
    prev: int,
    tree: Tree,
    rng: np.random.Generator,
    greedy: bool = False,
    residual: Residual = plain_residual,
) -> list[int]:
    """One tree draft-verify step from ``prev`` with SpecInfer's multi-candidate rule.

    Drafting: the children of a node are drawn independently (with replacement) from q given the
    node's token, the condition of SpecInfer's lossless multi-step rule; in greedy mode the r-th
    child is the draft's r-th most likely token. Verification walks down from the root as the
    module docstring says.
    """
    n = tree.num_nodes
    tokens = np.full(n, -1, dtype=np.int64)
    depths = tree.depths
    ranks = tree.ranks
    for i in tree.topological_order:
        parent = tree.parents[i]
        ctx = prev if parent == -1 else int(tokens[parent])
        q = _draft_at(draft, int(depths[i])).next_dist(ctx)
        if greedy:
            tokens[i] = int(np.argsort(-q, kind="stable")[int(ranks[i])])
        else:
            tokens[i] = _sample(q, rng)
    out: list[int] = []
    node, tok, depth = -1, prev, 0
    while True:
        p = target.next_dist(tok)
        children = tree.children(node)
        if not children:  # a leaf was accepted (or the tree is empty): bonus token
            out.append(int(np.argmax(p)) if greedy else _sample(p, rng))
            return out
        q = _draft_at(draft, depth + 1).next_dist(tok)
        accepted = -1
        for c in children:
            x = int(tokens[c])
            if greedy:
                if x == int(np.argmax(p)):
                    accepted = c
                    break
                continue
            if rng.random() < min(1.0, p[x] / q[x]):
                accepted = c
                break
            p = residual(p, q)
        if accepted == -1:
            out.append(int(np.argmax(p)) if greedy else _sample(p, rng))
            return out
        out.append(int(tokens[accepted]))
        node, tok, depth = accepted, int(tokens[accepted]), depth + 1


# ---------------------------------------------------------------------------------------------
# simulations
# ---------------------------------------------------------------------------------------------


def _step(
    target: MarkovLM,
    draft: Draft,
    prev: int,
    rng: np.random.Generator,
    k: int | None,
    tree: Tree | None,
    greedy: bool,
    residual: Residual,
) -> list[int]:
    if (k is None) == (tree is None):
        raise SpecsimError("pass exactly one of k (chain) or tree")
    if tree is not None:
        return tree_step(target, draft, prev, tree, rng, greedy, residual)
    assert k is not None
    if k < 0:
        raise SpecsimError(f"k must be >= 0, got {k}")
    return chain_step(target, draft, prev, k, rng, greedy, residual)


def tokens_per_step(
    target: MarkovLM,
    draft: Draft,
    n_steps: int,
    rng: np.random.Generator,
    k: int | None = None,
    tree: Tree | None = None,
    start: int = 0,
    greedy: bool = False,
) -> IntArray:
    """Run ``n_steps`` consecutive steps of one long generation; the tokens emitted by each step."""
    counts = np.empty(n_steps, dtype=np.int64)
    prev = start
    for s in range(n_steps):
        new = _step(target, draft, prev, rng, k, tree, greedy, plain_residual)
        counts[s] = len(new)
        prev = new[-1]
    return counts


def generate(
    target: MarkovLM,
    draft: Draft,
    start: int,
    length: int,
    rng: np.random.Generator,
    k: int | None = None,
    tree: Tree | None = None,
    greedy: bool = False,
    residual: Residual = plain_residual,
) -> tuple[list[int], int]:
    """The first ``length`` tokens after ``start`` and the number of steps it took."""
    seq: list[int] = []
    steps = 0
    while len(seq) < length:
        seq += _step(target, draft, seq[-1] if seq else start, rng, k, tree, greedy, residual)
        steps += 1
    return seq[:length], steps


def sequence_counts(
    target: MarkovLM,
    draft: Draft,
    start: int,
    length: int,
    n_runs: int,
    rng: np.random.Generator,
    k: int | None = None,
    tree: Tree | None = None,
    residual: Residual = plain_residual,
) -> IntArray:
    """Counts of each length-``length`` continuation of ``start`` over ``n_runs`` runs, as a flat
    array indexed by ``ravel_multi_index`` (V^length cells)."""
    V = target.vocab_size
    counts = np.zeros(V**length, dtype=np.int64)
    for _ in range(n_runs):
        seq, _ = generate(target, draft, start, length, rng, k, tree, False, residual)
        counts[np.ravel_multi_index(tuple(seq), (V,) * length)] += 1
    return counts


def exact_sequence_probs(target: MarkovLM, start: int, length: int) -> FloatArray:
    """P(continuation) under plain sampling from the target, same indexing as ``sequence_counts``."""
    probs = target.next_dist(start).copy()
    V = target.vocab_size
    for _ in range(length - 1):
        last = np.arange(probs.size) % V  # the last token of each flattened prefix
        probs = (probs[:, None] * target.table[last]).reshape(-1)
    return probs


def greedy_sequence(target: MarkovLM, start: int, length: int) -> list[int]:
    """Plain greedy decoding of the target: the argmax at every position."""
    seq: list[int] = []
    prev = start
    for _ in range(length):
        prev = int(np.argmax(target.next_dist(prev)))
        seq.append(prev)
    return seq

"""``specsim validate``: the exact reference sampler against the closed-form formulas.

Each row compares a formula with a seeded Monte-Carlo run of ``specsim.reference``:

* tokens per step (chain i.i.d., chain per-position, trees under SpecInfer's rule) on circulant toy
  models, where the formulas are exact: passes when |z| < ``Z_LIMIT`` (two-sided false-alarm rate
  about 6e-5 per row);
* the output distribution (joint law of the first three tokens) against the target's, on the
  seed chapter's random Markov models: a chi-square test that passes when p > ``P_LIMIT``
  (false-alarm rate 1e-3 per row);
* a negative control: the same test with the residual replaced by p (deliberately wrong), which
  must *fail* the chi-square test (the row passes when the test detects the fault);
* greedy decoding: every speculative output equals the target's argmax decoding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from specsim.acceptance import reference as ref
from specsim.acceptance.chain import AcceptanceProfile, expected_tokens
from specsim.acceptance.sibling_probs import sibling_probs_multicandidate
from specsim.acceptance.tree_shapes import chain, eagle2_tree, medusa_tree
from specsim.acceptance.trees import Tree

Z_LIMIT = 4.0
P_LIMIT = 1e-3


@dataclass(frozen=True)
class CheckRow:
    """One comparison: a formula's value against the reference's estimate."""

    case: str
    quantity: str
    formula: float
    reference: float
    std_error: float | None
    z: float | None  # (reference - formula) / std_error, for Monte-Carlo means
    p_value: float | None  # chi-square p-value, for distribution checks
    passed: bool

    def as_dict(self) -> dict[str, object]:
        return {
            "case": self.case,
            "quantity": self.quantity,
            "formula": self.formula,
            "reference": self.reference,
            "std_error": self.std_error,
            "z": self.z,
            "p_value": self.p_value,
            "passed": self.passed,
        }


def chi_square_test(counts: ArrayLike, probs: ArrayLike, min_expected: float = 5.0) -> tuple[float, int, float]:
    """Pearson chi-square goodness of fit; cells with expected count < ``min_expected`` are pooled.

    Returns (statistic, degrees of freedom, p-value).
    """
    c = np.asarray(counts, dtype=np.float64)
    expected = np.asarray(probs, dtype=np.float64) * c.sum()
    big = expected >= min_expected
    obs = np.append(c[big], c[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    if exp[-1] < min_expected:  # fold a too-small pooled cell into the smallest kept cell
        j = int(np.argmin(exp[:-1]))
        obs[j] += obs[-1]
        exp[j] += exp[-1]
        obs, exp = obs[:-1], exp[:-1]
    stat = float(((obs - exp) ** 2 / exp).sum())
    dof = obs.size - 1
    return stat, dof, float(stats.chi2.sf(stat, dof))


def _tokens_row(
    case: str,
    formula: float,
    target: ref.MarkovLM,
    draft: ref.Draft,
    n_steps: int,
    rng: np.random.Generator,
    k: int | None = None,
    tree: Tree | None = None,
) -> CheckRow:
    counts = ref.tokens_per_step(target, draft, n_steps, rng, k=k, tree=tree)
    mean = float(counts.mean())
    se = float(counts.std(ddof=1) / np.sqrt(counts.size))
    z = (mean - formula) / se if se > 0 else (0.0 if mean == formula else np.inf)
    return CheckRow(case, "tokens/step", float(formula), mean, se, float(z), None, bool(abs(z) < Z_LIMIT))


def _distribution_row(
    case: str,
    target: ref.MarkovLM,
    draft: ref.Draft,
    n_runs: int,
    rng: np.random.Generator,
    k: int | None = None,
    tree: Tree | None = None,
    residual: ref.Residual = ref.plain_residual,
    expect_detect: bool = False,
) -> CheckRow:
    length = 3
    counts = ref.sequence_counts(target, draft, 0, length, n_runs, rng, k=k, tree=tree, residual=residual)
    probs = ref.exact_sequence_probs(target, 0, length)
    _, _, pvalue = chi_square_test(counts, probs)
    tv = 0.5 * float(np.abs(counts / counts.sum() - probs).sum())
    passed = pvalue < P_LIMIT if expect_detect else pvalue > P_LIMIT
    quantity = "TV, first 3 tokens (must be detected)" if expect_detect else "TV, first 3 tokens"
    return CheckRow(case, quantity, 0.0, tv, None, None, pvalue, bool(passed))


def _greedy_row(
    case: str,
    target: ref.MarkovLM,
    draft: ref.Draft,
    rng: np.random.Generator,
    k: int | None = None,
    tree: Tree | None = None,
) -> CheckRow:
    V = target.vocab_size
    matches = 0
    for start in range(V):
        seq, _ = ref.generate(target, draft, start, 12, rng, k=k, tree=tree, greedy=True)
        matches += seq == ref.greedy_sequence(target, start, 12)
    frac = matches / V
    return CheckRow(case, "share equal to argmax decoding", 1.0, frac, None, None, None, frac == 1.0)


def run_validation(seed: int = 0, n_steps: int = 10_000, n_runs: int = 10_000) -> list[CheckRow]:
    """Run every check with generators derived from ``seed``; a few seconds at the defaults."""
    seeds = np.random.SeedSequence(seed).spawn(10)
    rows = _chain_rows(seeds[:3], n_steps) + _tree_rows(seeds[3], n_steps)
    # output distribution on the seed chapter's setting: random 6-token chains, mixture draft
    rng = np.random.default_rng(seeds[4])
    target = ref.random_markov_lm(6, 2.0, rng)
    draft = ref.mixture(target, ref.random_markov_lm(6, 2.0, rng), 0.7)
    rows += _distribution_rows(target, draft, n_runs, rng)
    rows += _greedy_rows(target, draft, np.random.default_rng(seeds[5]))
    return rows


def _chain_rows(seeds: list[np.random.SeedSequence], n_steps: int) -> list[CheckRow]:
    """Tokens per step of chains on circulant toy models: one alpha, then per-position alphas."""
    rows: list[CheckRow] = []

    rng = np.random.default_rng(seeds[0])
    target, draft = ref.circulant_pair(6, 0.8, rng)
    rows.append(_tokens_row("chain, alpha=0.8, k=4", float(expected_tokens(0.8, 4)), target, draft, n_steps, rng, k=4))

    rng = np.random.default_rng(seeds[1])
    target, draft = ref.circulant_pair(6, 0.6, rng)
    rows.append(
        _tokens_row(
            "chain, alpha=0.6, k=3 (seed: 2.18)", float(expected_tokens(0.6, 3)), target, draft, n_steps, rng, k=3
        )
    )

    rng = np.random.default_rng(seeds[2])
    alphas = [0.9, 0.7, 0.5, 0.3]
    target, drafts = ref.circulant_pair(6, alphas, rng)
    rows.append(
        _tokens_row(
            "chain, alphas=0.9,0.7,0.5,0.3 (Medusa-like decay)",
            float(AcceptanceProfile.from_alphas(alphas).mean_tokens(4)),
            target,
            drafts,
            n_steps,
            rng,
            k=4,
        )
    )
    return rows


def _tree_rows(seed: np.random.SeedSequence, n_steps: int) -> list[CheckRow]:
    """Tokens per step of trees under SpecInfer's rule on a circulant toy model: Medusa-style and EAGLE-2-style."""
    rng = np.random.default_rng(seed)
    target, draft = ref.circulant_pair(6, 0.6, rng)
    assert isinstance(draft, ref.MarkovLM)  # one beta: one draft table
    probs = sibling_probs_multicandidate(target.table[0], draft.table[0], 4)
    tree = medusa_tree([3, 2])
    rows = [
        _tokens_row(
            "tree: Medusa-style top-(3,2), SpecInfer rule",
            float(tree.expected_tokens(probs)),
            target,
            draft,
            n_steps,
            rng,
            tree=tree,
        )
    ]
    tree = eagle2_tree(probs, topk=3, depth=4, num_nodes=10)
    rows.append(
        _tokens_row(
            "tree: EAGLE-2-style topk 3 x depth 4 -> 10 nodes",
            float(tree.expected_tokens(probs)),
            target,
            draft,
            n_steps,
            rng,
            tree=tree,
        )
    )
    return rows


def _distribution_rows(target: ref.MarkovLM, draft: ref.Draft, n_runs: int, rng: np.random.Generator
                       ) -> list[CheckRow]:
    """The joint law of the first three tokens against the target's: a chain and a tree with `draft`, a chain
    with an unrelated draft (drawn from `rng` after the first two), and the negative control."""
    rows = [_distribution_row("chain k=4, seed's random Markov LMs", target, draft, n_runs, rng, k=4)]
    rows.append(
        _distribution_row(
            "tree top-(2,2), seed's random Markov LMs", target, draft, n_runs, rng, tree=medusa_tree([2, 2])
        )
    )
    unrelated = ref.random_markov_lm(6, 2.0, rng)
    rows.append(_distribution_row("chain k=4, unrelated draft", target, unrelated, n_runs, rng, k=4))
    rows.append(
        _distribution_row(
            "negative control: residual := p (wrong)",
            target,
            unrelated,
            n_runs,
            rng,
            k=4,
            residual=lambda p, q: p,
            expect_detect=True,
        )
    )
    return rows


def _greedy_rows(target: ref.MarkovLM, draft: ref.Draft, rng: np.random.Generator) -> list[CheckRow]:
    """Greedy decoding with a chain, a tree and no drafts: every output equals the target's argmax decoding."""
    return [
        _greedy_row("greedy chain k=4", target, draft, rng, k=4),
        _greedy_row("greedy tree top-(3,2)", target, draft, rng, tree=medusa_tree([3, 2])),
        _greedy_row("greedy, no drafts (plain decoding)", target, draft, rng, tree=chain(0)),
    ]

"""The planner against published speculative-decoding results (`specsim validate --published`), pinned.

Each assertion is a figure the README and the session notes quote. Where a floor of the issue holds it
is asserted at the floor; where it does not (yet) the current figure is pinned so that it cannot get
worse unnoticed, and the comment says so. Groups marked "fit" fitted engine figures (in-sample).
"""

from __future__ import annotations

import pytest

from specsim.validation.score import PublishedReport, score


@pytest.fixture(scope="module")
def report() -> PublishedReport:
    return score()


def _group(r: PublishedReport, group: str, mode: str):
    return next(g for g in r.groups if g.group == group and g.mode == mode)


def test_spec_bench_a100_with_its_own_acceptance_is_within_the_floor(report: PublishedReport) -> None:
    """Spec-Bench on A100 (eager research loops priced from counted ops, no fitted figure): the cost side
    alone, given the leaderboard's own mean accepted tokens."""
    g = _group(report, "specbench-a100", "measured")
    assert g.n >= 20 and g.role == "check"
    assert g.median_abs_error <= 0.05 and abs(g.median_bias) <= 0.03


def test_priors_overall_meet_the_acceptance_floor(report: PublishedReport) -> None:
    """Nothing given (priors decide): every stated-hardware row; issue #10's floor is 15% and |bias| 5%."""
    o = report.overall("priors")
    assert o.n >= 300
    assert o.median_abs_error <= 0.15 and abs(o.median_bias) <= 0.05


def test_spec_bench_a100_from_priors(report: PublishedReport) -> None:
    g = _group(report, "specbench-a100", "priors")
    assert g.n >= 100 and g.median_abs_error <= 0.10 and abs(g.median_bias) <= 0.05


def test_fitted_groups_are_marked_in_sample(report: PublishedReport) -> None:
    roles = {g.group: g.role for g in report.groups}
    assert roles["eagle3-sglang-h100"] == "fit"
    assert roles["specdecode-bench-vllm-h100"] == "fit"
    assert roles["specbench-a100"] == roles["eagle3-vllm-rtx3090"] == "check"


def _crossover(report: PublishedReport, sweep_start: str):
    return next(c for c in report.crossovers if c.sweep.startswith(sweep_start))


def test_sglang_table_3_crossover(report: PublishedReport) -> None:
    """EAGLE-3 paper Table 3 (SGLang 0.4.4, H100, chain 3): EAGLE-1 first below 1x at batch 24; EAGLE-3
    stays above 1x through 64. Floor: the prediction at 16-32, EAGLE-3 >= 1x through 64 (in-sample: this
    table fitted sglang-0.4's host figures)."""
    e1 = _crossover(report, "eagle3-sglang-h100: llama-3.1-8b eagle k=3")
    e3 = _crossover(report, "eagle3-sglang-h100: llama-3.1-8b eagle3 k=3")
    assert e1.published == 24 and e1.priors is not None and 16 <= e1.priors <= 32
    assert e3.published is None and e3.priors is None


def test_vllm_table_5_crossover_out_of_sample(report: PublishedReport) -> None:
    """EAGLE-3 paper Table 5 (vLLM V1, chain 2): EAGLE-1 first below 1x at batch 32, EAGLE-3 >= 1x through
    56. Floor: EAGLE-1 at 24-48, EAGLE-3 >= 1x through 48 (vllm-0.10's figures were fitted on another
    source, SpecDecode-Bench: out of sample)."""
    e1 = _crossover(report, "eagle3-vllm-rtx3090: llama-3.1-8b eagle k=2")
    e3 = _crossover(report, "eagle3-vllm-rtx3090: llama-3.1-8b eagle3 k=2")
    assert e1.published == 32 and e1.priors is not None and 24 <= e1.priors <= 48
    assert e3.priors is None or e3.priors > 48


def test_sglang_baseline_tokens_per_second(report: PublishedReport) -> None:
    """SGLang, H100, Llama-3.1-8B, batch 1: 158.34 tok/s (EAGLE-3 Table 4): within 10%."""
    g = _group(report, "eagle3-sglang-h100", "priors")
    assert g.baseline_n >= 1 and abs(g.baseline_error) <= 0.10


def test_measured_overall_is_pinned_where_the_floor_is_not_met(report: PublishedReport) -> None:
    """Issue #9's floor (10%, |bias| 5%, measured acceptance given): the median error is within it, the bias
    is NOT: the EAGLE-3 paper's 70B rows (+19%: the repositories' own loop on several A100s costs more per
    cycle than the counted ops explain), Spec-Bench's RTX 3090 board (+13%) and SGLang's trees on Hopper
    (+10%: FlashInfer instead of FA3 for topk > 1, not modelled) pull it up. Pinned at today's figure so it
    cannot get worse."""
    o = report.overall("measured")
    assert o.n >= 120
    assert o.median_abs_error <= 0.10 and o.median_bias <= 0.09


def test_specbundle_engine_rows_with_their_acceptance(report: PublishedReport) -> None:
    """The largest held-out engine group (SpecBundle: SGLang on H200, 70 rows of Llama-3.1-8B EAGLE-3 at
    batch 1, tok/s and acceptance from the same run) within the issue's floor, and its baseline tok/s."""
    g = _group(report, "specbundle-sglang-h200", "measured")
    assert g.n >= 60 and g.median_abs_error <= 0.05 and abs(g.median_bias) <= 0.03
    assert abs(g.baseline_error) <= 0.05

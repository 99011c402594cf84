from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from specsim.acceptance.chain import expected_tokens
from specsim.acceptance.metrics import load_acceptance, load_metrics, parse_prometheus, read_metrics
from specsim.errors import SpecsimError

DATA = Path(__file__).parents[1] / "data"


def test_vllm_scrape_sums_engines_and_converts_per_position() -> None:
    r = load_metrics(DATA / "vllm_metrics.txt")
    assert r.engine == "vllm"
    # drafts 600 + 400, accepted 1060 + 640 -> mean length 1 + 1700/1000 (includes the bonus token)
    assert r.mean_length == pytest.approx(2.7)
    assert r.num_drafts == 1000 and r.k == 3
    assert r.draft_acceptance_rate == pytest.approx(1700 / 3000)
    # per-position (unconditional, vLLM): 800/1000, 600/1000, 300/1000
    assert r.unconditional_rates == pytest.approx((0.8, 0.6, 0.3))
    prof = r.profile()
    assert prof.rates == pytest.approx((0.8, 0.75, 0.5))  # conditional
    # two independent routes agree: per-position counters vs the accepted-tokens counter
    assert float(prof.mean_tokens(3)) == pytest.approx(r.mean_length)
    assert "bonus" in r.convention


def test_vllm_without_per_position_fits_alpha() -> None:
    text = (
        'vllm:spec_decode_num_drafts_total{engine="0"} 500\n'
        'vllm:spec_decode_num_draft_tokens_total{engine="0"} 2000\n'
        'vllm:spec_decode_num_accepted_tokens_total{engine="0"} 1180.8\n'
    )
    r = read_metrics(text)
    assert r.k == 4 and r.unconditional_rates is None
    prof = r.profile()
    assert float(prof.mean_tokens(4)) == pytest.approx(1 + 1180.8 / 500)
    assert prof.tail == pytest.approx(0.8, abs=1e-6)  # 3.3616 tokens at k=4 <-> alpha 0.8


def test_bare_and_total_spellings_are_not_double_counted() -> None:
    text = (
        "vllm:spec_decode_num_drafts_total 100\nvllm:spec_decode_num_drafts 100\n"
        "vllm:spec_decode_num_accepted_tokens_total 150\nvllm:spec_decode_num_accepted_tokens 150\n"
        "vllm:spec_decode_num_drafts_created 1.7e9\n"
    )
    assert read_metrics(text).mean_length == pytest.approx(2.5)
    bare = "vllm:spec_decode_num_drafts 100\nvllm:spec_decode_num_accepted_tokens 150\n"
    assert read_metrics(bare).mean_length == pytest.approx(2.5)


def test_vllm_zero_drafts_is_an_error() -> None:
    text = 'vllm:spec_decode_num_drafts_total{engine="0"} 0\nvllm:spec_decode_num_accepted_tokens_total{engine="0"} 0\n'
    with pytest.raises(SpecsimError, match="no drafts"):
        read_metrics(text)


def test_sglang_gauges_are_averaged_and_need_k() -> None:
    r = load_metrics(DATA / "sglang_metrics.txt")
    assert r.engine == "sglang" and r.mean_length == pytest.approx(3.2)
    with pytest.raises(SpecsimError, match="pass --k"):
        r.profile()
    prof = r.profile(k=4)
    assert float(prof.mean_tokens(4)) == pytest.approx(3.2, abs=1e-9)
    assert float(expected_tokens(prof.tail, 4)) == pytest.approx(3.2, abs=1e-9)
    # an impossible k (mean 3.2 > k + 1 = 3) is named
    with pytest.raises(SpecsimError, match="outside"):
        r.profile(k=2)


def test_sglang_num_steps_gauge_gives_k() -> None:
    text = 'sglang:spec_accept_length{tp_rank="0"} 2.5\nsglang:spec_num_steps{tp_rank="0"} 3\n'
    r = read_metrics(text)
    assert r.k == 3 and float(r.profile().mean_tokens(3)) == pytest.approx(2.5)


def test_trtllm_acceptance_length() -> None:
    r = load_metrics(DATA / "trtllm_metrics.txt")
    assert r.engine == "trtllm" and r.mean_length == pytest.approx(2.5)
    assert float(r.profile(k=3).mean_tokens(3)) == pytest.approx(2.5)


def test_scrape_without_counters_is_an_error() -> None:
    with pytest.raises(SpecsimError, match="no speculative-decoding metrics found"):
        load_metrics(DATA / "no_spec_metrics.txt")
    with pytest.raises(SpecsimError, match="no such file"):
        load_metrics(DATA / "absent.txt")


def test_prometheus_label_parsing() -> None:
    text = (
        "# HELP x y\n"
        'm{a="1",b="with \\"quote\\", comma",position="2"} 3.5 1700000000000\n'
        "plain_metric 7\n"
        "bad line here\n"
    )
    samples = parse_prometheus(text)
    assert [s.name for s in samples] == ["m", "plain_metric"]
    assert samples[0].label("position") == "2" and samples[0].value == 3.5
    assert samples[0].label("b") == 'with "quote", comma'


def test_load_acceptance_dispatches_on_content(tmp_path: Path) -> None:
    assert float(load_acceptance(DATA / "vllm_metrics.txt").mean_tokens(3)) == pytest.approx(2.7)
    hist = load_acceptance(DATA / "histogram.csv")
    assert hist.rates == pytest.approx((0.8, 0.75, 0.5))
    assert load_acceptance(DATA / "alphas.yaml").rates == pytest.approx((0.9, 0.8, 0.5))
    f = tmp_path / "a.json"
    f.write_text('{"unconditional": [0.8, 0.6, 0.3]}')
    assert load_acceptance(f).rates == pytest.approx((0.8, 0.75, 0.5))
    f.write_text('{"tokens_per_step": {"1": 200, "2": 200, "3": 300, "4": 300}}')
    assert load_acceptance(f).rates == pytest.approx((0.8, 0.75, 0.5))
    f.write_text('{"mean_length": 3.3616, "k": 4}')
    assert load_acceptance(f).tail == pytest.approx(0.8, abs=1e-4)
    f.write_text('{"alpha": 0.7}')
    assert np.allclose(load_acceptance(f).mean_tokens([1, 2]), expected_tokens(0.7, [1, 2]))


def test_load_acceptance_errors(tmp_path: Path) -> None:
    f = tmp_path / "x.yaml"
    f.write_text("foo: 1\n")
    with pytest.raises(SpecsimError, match="no acceptance found"):
        load_acceptance(f)
    f.write_text("just some words\n")
    with pytest.raises(SpecsimError, match="no speculative-decoding metrics"):
        load_acceptance(f)
    c = tmp_path / "h.csv"
    c.write_text("length,n\n1,2\n")
    with pytest.raises(SpecsimError, match="CSV header"):
        load_acceptance(c)
    f.write_text("alpha: 1.4\n")
    with pytest.raises(SpecsimError, match=str(f)):
        load_acceptance(f)
    with pytest.raises(SpecsimError, match="no such file"):
        load_acceptance(tmp_path / "absent.csv")


# ---------------------------------------------------------------------------------------------
# a window between two scrapes; TensorRT-LLM per position; k from SGLang's rate
# ---------------------------------------------------------------------------------------------

_BEFORE = (
    'vllm:spec_decode_num_drafts_total{engine="0"} 1000\n'
    'vllm:spec_decode_num_draft_tokens_total{engine="0"} 3000\n'
    'vllm:spec_decode_num_accepted_tokens_total{engine="0"} 1700\n'
    'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 800\n'
    'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 600\n'
    'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="2"} 300\n'
)
_AFTER = (
    'vllm:spec_decode_num_drafts_total{engine="0"} 1500\n'
    'vllm:spec_decode_num_draft_tokens_total{engine="0"} 4500\n'
    'vllm:spec_decode_num_accepted_tokens_total{engine="0"} 2400\n'
    'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 1150\n'
    'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 850\n'
    'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="2"} 400\n'
)


def test_window_between_two_vllm_scrapes() -> None:
    """Only the 500 drafts between the scrapes count: per position 350/500, 250/500, 100/500 (not the
    cumulative 1150/1500 ...), and the mean length 1 + 700/500 agrees with the per-position route."""
    from specsim.acceptance.metrics import read_metrics_window

    r = read_metrics_window(_BEFORE, _AFTER)
    assert r.num_drafts == 500 and r.k == 3
    assert r.unconditional_rates == pytest.approx((0.7, 0.5, 0.2))
    assert r.mean_length == pytest.approx(1 + 700 / 500)
    assert float(r.profile().mean_tokens(3)) == pytest.approx(r.mean_length)
    assert read_metrics(_AFTER).mean_length == pytest.approx(1 + 2400 / 1500)  # the cumulative reading differs


def test_window_refuses_a_counter_reset(tmp_path: Path) -> None:
    from specsim.acceptance.metrics import load_metrics_window

    b, a = tmp_path / "before.txt", tmp_path / "after.txt"
    b.write_text(_AFTER)
    a.write_text(_BEFORE)  # counters went down: the engine restarted in between
    with pytest.raises(SpecsimError, match="went down"):
        load_metrics_window(b, a)


def test_trtllm_per_position_counters_and_window() -> None:
    from specsim.acceptance.metrics import read_metrics_window

    def scrape(d: list[int], acc: list[int]) -> str:
        return "".join(f'trtllm_spec_decode_drafted_tokens_total{{token_position="{i}"}} {v}\n'
                       f'trtllm_spec_decode_accepted_tokens_total{{token_position="{i}"}} {w}\n'
                       for i, (v, w) in enumerate(zip(d, acc, strict=True)))

    r = read_metrics(scrape([100, 100, 100], [80, 50, 20]))
    assert r.engine == "trtllm" and r.k == 3
    assert r.unconditional_rates == pytest.approx((0.8, 0.5, 0.2)) and r.mean_length == pytest.approx(2.5)
    w = read_metrics_window(scrape([100, 100, 100], [80, 50, 20]), scrape([300, 300, 300], [220, 130, 60]))
    assert w.unconditional_rates == pytest.approx((0.7, 0.4, 0.2))


def test_sglang_rate_gives_k() -> None:
    """sglang:spec_accept_rate = accepted / proposed drafts: with length 3.0 and rate 0.5, k = 4."""
    r = read_metrics('sglang:spec_accept_length{tp_rank="0"} 3.0\nsglang:spec_accept_rate{tp_rank="0"} 0.5\n')
    assert r.k_inferred == 4 and r.k is None
    assert float(r.profile().mean_tokens(4)) == pytest.approx(3.0)
    assert float(r.profile(k=2).mean_tokens(2)) == pytest.approx(3.0)  # a k the user states wins

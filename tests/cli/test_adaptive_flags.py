"""`evaluate --adaptive-stop`: an adaptive draft length priced through the same step as a fixed chain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specsim.acceptance.adaptive import adaptive_stats, stop_rule
from specsim.cost.model import load_model
from specsim.drafts.build import make_draft
from tests.corpus.harness import assert_clean_failure, invoke, snapshot

BASE = ("evaluate", "-H", "h100-sxm", "-m", "llama-3.1-8b", "-d", "eagle3", "--k", "7", "-b", "16")


def _json(*extra: str) -> dict:
    r = invoke(*BASE, *extra, "-f", "json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def test_a_signal_that_never_stops_is_the_fixed_chain() -> None:
    fixed, never = _json(), _json("--adaptive-stop", "0,0")
    for key in ("tokens_per_step", "step_ms", "speedup", "draft_ms", "verify_ms"):
        assert never[key] == pytest.approx(fixed[key], rel=1e-12), key
    assert never["expected_k"] == pytest.approx(7.0)


def test_a_perfect_signal_keeps_the_tokens_with_fewer_drafts() -> None:
    fixed, perfect = _json(), _json("--adaptive-stop", "1,0")
    assert perfect["tokens_per_step"] == pytest.approx(fixed["tokens_per_step"], rel=1e-12)
    assert perfect["expected_k"] < 7.0 and perfect["draft_ms"] < fixed["draft_ms"]
    assert perfect["step_ms"] < fixed["step_ms"] and perfect["speedup"] > fixed["speedup"]


@pytest.mark.parametrize("convention", ["inclusive", "exclusive"])
def test_tokens_per_step_are_the_stop_rules(convention: str) -> None:
    d = make_draft({"method": "eagle3"}, load_model("llama-3.1-8b"), "test")
    want = adaptive_stats(stop_rule(d.rates(7), 0.7, 0.2, convention=convention))  # type: ignore[arg-type]
    got = _json("--adaptive-stop", "0.7,0.2", "--adaptive-convention", convention)
    assert got["tokens_per_step"] == pytest.approx(float(want.expected_tokens), rel=1e-12)
    assert got["expected_k"] == pytest.approx(float(want.expected_k), rel=1e-12)


@pytest.mark.parametrize(("extra", "expect"), [
    (("--adaptive-stop", "1.2,0"), ("--adaptive-stop needs RECALL,FALSE_ALARM",)),
    (("--adaptive-stop", "0.5"), ("--adaptive-stop needs RECALL,FALSE_ALARM",)),
    (("--adaptive-stop", "0.5,0.1", "--adaptive-convention", "sometimes"), ("--adaptive-convention",)),
    (("--adaptive-stop", "0.5,0.1", "--topk", "4", "--num-draft-tokens", "16"), ("chain",)),
])
def test_bad_adaptive_input_gets_one_line(tmp_path: Path, extra: tuple[str, ...], expect: tuple[str, ...]) -> None:
    before = snapshot(tmp_path)
    r = invoke(*BASE, *extra, cwd=tmp_path)
    assert_clean_failure(r, expect, before, snapshot(tmp_path), " ".join(extra))

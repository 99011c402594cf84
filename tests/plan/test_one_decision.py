"""One question, one answer: a plan's table, headline, policy and engine configs name the same configuration at
every batch they speak of, read back from `specsim plan -f json` as a user's program would; and a setting the
user made is never reported as a finding."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from specsim.cli.main import main
from specsim.engines.configs.atom import ATOM_MAX_K
from specsim.plan.optimize import plan
from specsim.plan.summary import OFF_BY_SETTING, plan_dict
from specsim.scenario.scenario import parse_scenario

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
#: every bundled scenario as written, and the tree-planning one on an engine that runs a tree per batch band
CASES = [(p, ()) for p in SCENARIOS] + [(ROOT / "scenarios" / "chat-llama70b-h100.yaml", ("-e", "sglang"))]


def _plan_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    with pytest.raises(SystemExit) as exc:
        main(["plan", *args, "-f", "json"])
    out, err = capsys.readouterr()
    assert exc.value.code == 0, err
    return dict(json.loads(out))


def _shape(k: int, topk: int, nodes: int | None) -> tuple[int, int, int | None]:
    """A configuration as (k, topk, draft nodes); no speculation (off, or nothing fits) is (0, 1, None)."""
    return (k, topk if nodes else 1, nodes or None) if k > 0 else (0, 1, None)


def _policy_at(data: dict[str, Any], batch: int) -> tuple[int, int, int | None]:
    seg = next(s for s in data["policy"] if s["batch_from"] <= batch <= s["batch_to"])
    return _shape(seg["k"], seg.get("topk") or 1, seg.get("num_draft_tokens"))


def _vllm_k(cfg: dict[str, Any], batch: int) -> int:
    spec = cfg["--speculative-config"]
    bands = spec.get("num_speculative_tokens_per_batch_size")
    if not bands:
        return int(spec["num_speculative_tokens"])
    return next((k for lo, hi, k in bands if lo <= batch <= hi), 0)


def _trtllm_k(cfg: dict[str, Any], batch: int) -> int:
    if batch > cfg["max_concurrency"]:
        return 0
    return next(k for top, k in sorted((int(t), k) for t, k in cfg["draft_len_schedule"].items()) if batch <= top)


def _sglang_at(cfg: dict[str, Any], batch: int) -> tuple[int, int, int | None]:
    bands = cfg.get("by_batch") or [{**cfg, "batch_from": 1, "batch_to": 10**9}]
    band = next((b for b in bands if b["batch_from"] <= batch <= b["batch_to"]), None)
    if band is None:
        return (0, 1, None)
    k, topk = band["--speculative-num-steps"], band["--speculative-eagle-topk"]
    nodes = band["--speculative-num-draft-tokens"] - 1  # SGLang counts the root
    return _shape(k, topk, nodes if topk > 1 else None)


def _headline_configs(text: str) -> list[tuple[tuple[int, int, int | None], int]]:
    """The headline's '<config> up to batch N' (and 'shrinking to <config> by batch N') phrases."""
    pat = r"(k = (\d+)|tree topk (\d+) x (\d+) nodes, depth (\d+)) (?:up to|by) batch (\d+)"
    out = []
    for m in re.finditer(pat, text):
        if m.group(2):
            out.append((_shape(int(m.group(2)), 1, None), int(m.group(6))))
        else:
            out.append((_shape(int(m.group(5)), int(m.group(3)), int(m.group(4))), int(m.group(6))))
    return out


@pytest.mark.parametrize(("path", "extra"), CASES, ids=lambda c: c.stem if isinstance(c, Path) else "-".join(c))
def test_table_headline_policy_and_engine_configs_name_one_configuration(
        path: Path, extra: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    data = _plan_json(capsys, str(path), *extra)
    cfg = data["engine_configs"]
    engine = data["engine"]
    assert data["buckets"]
    for row in data["buckets"]:
        b = row["batch"]
        mine = _shape(row["k"], row.get("topk") or 1, row.get("num_draft_tokens"))
        assert _policy_at(data, b) == mine, (row["bucket"], b)
        if mine[0] == 0:
            continue
        assert row["draft"] == data["draft"] and row["method"] == data["method"]
        # the scenario's own engine runs exactly this configuration at this batch
        if engine == "vllm":
            assert mine[2] is None and _vllm_k(cfg["vllm"], b) == mine[0]
            assert _trtllm_k(cfg["trtllm"], b) == mine[0]  # chains: every engine's schedule names the same k
            assert _sglang_at(cfg["sglang"], b) == mine
            if cfg.get("atom"):
                assert cfg["atom"].get("by_batch", [cfg["atom"]])[0]["--num-speculative-tokens"] <= ATOM_MAX_K
        elif engine == "sglang":
            assert _sglang_at(cfg["sglang"], b) == mine
    # the headline's configurations are the policy's where it says they run
    said = _headline_configs(data["recommendation"])
    if any(s["k"] > 0 for s in data["policy"]) and data["method"] != "none":
        assert said or data["arrival"] is not None
    for shape, batch in said:
        assert _policy_at(data, batch) == shape, (shape, batch)
    # the headline's gain carries the JSON's 80% band, which brackets it
    assert data["gain_low"] <= data["gain"] <= data["gain_high"]
    if data["method"] != "none" and data["serving"] is None:
        lo, hi = data["gain_low"], data["gain_high"]
        band = (f"80% band {lo:.2f}x-{hi:.2f}x" if data["objective"] == "latency" or data["arrival"] else
                f"(80% band {(lo - 1) * 100:+.0f}% to {(hi - 1) * 100:+.0f}%)")
        assert band in data["recommendation"], data["recommendation"]
    if data["arrival"] is not None and data["serving"] is None:
        row = data["buckets"][0]
        text = "k = " + str(row["k"]) if not row.get("num_draft_tokens") else f"tree topk {row['topk']}"
        assert text in data["recommendation"]


def test_max_k_zero_is_the_scenarios_setting_not_a_finding() -> None:
    """max_k: 0 turns speculation off by the user's hand: the plan says so, weighs no acceptance band and flags no
    prior (it used to say 'Do not speculate ... holds across the prior's band (+0%...+0%)')."""
    s = parse_scenario({"hardware": "h100-sxm", "model": "llama-3.1-8b", "drafts": ["eagle3"], "max_k": 0,
                        "load": {"buckets": [{"batch": 4, "context": 2048}]}}, "x")
    p = plan(s)
    data = plan_dict(p)
    assert data["recommendation"].startswith(OFF_BY_SETTING) and "max_k: 0" in data["recommendation"]
    assert "band" not in data["recommendation"] and "+0%" not in data["recommendation"]
    assert p.band is None and not p.notes and not p.speculates
    assert all(r["k"] == 0 for r in data["buckets"])
    assert all(v is None for k, v in data["engine_configs"].items() if k != "note")
    arrival = parse_scenario({"hardware": "h100-sxm", "model": "llama-3.1-8b", "drafts": ["eagle3"], "max_k": 0,
                              "load": {"arrival_rate_rps": 2.0, "prompt_tokens": 512, "output_tokens": 128}}, "x")
    pa = plan(arrival)
    assert plan_dict(pa)["recommendation"].startswith(OFF_BY_SETTING) and pa.band is None


def test_a_policy_decided_elsewhere_sets_every_buckets_row() -> None:
    """A policy chosen by simulation replaces the table's rows: each bucket at the k the policy runs at its batch,
    its figures those `evaluate` gives for that k there (config_metrics), the gain recomputed from them; and the
    arrival rate's row at the k the policy runs at the concurrency that k produces."""
    from specsim.plan.decide import target_of
    from specsim.plan.under_policy import under_policy
    from specsim.step.evaluate import config_metrics
    from specsim.step.policy import Policy

    s = parse_scenario({"hardware": "h100-sxm", "model": "llama-3.1-8b", "drafts": ["eagle3"], "max_k": 6,
                        "load": {"buckets": [{"name": "quiet", "hours": 12, "batch": 2, "context": 2048},
                                             {"name": "busy", "hours": 12, "batch": 96, "context": 2048}]}}, "x")
    p = plan(s)
    policy = Policy.of_ranges(0, [(1, 16, 3), (17, 64, 1)])  # off above 64: the busy bucket runs plain decoding
    d = p.scenario.drafts[0]
    q = under_policy(p, d, policy)
    t = target_of(p.scenario)
    quiet, busy = q.buckets
    assert (quiet.k, busy.k) == (3, 0) and busy.draft == "none"
    want = config_metrics(t, d, 3, 2, 2048)
    assert quiet.rows[0].throughput_tok_s == pytest.approx(float(want.throughput_tok_s), rel=1e-12)
    assert busy.rows[0].throughput_tok_s == pytest.approx(busy.baseline_rows[0].throughput_tok_s, rel=1e-12)
    thr = 0.5 * quiet.rows[0].throughput_tok_s + 0.5 * busy.rows[0].throughput_tok_s
    base = 0.5 * quiet.baseline_rows[0].throughput_tok_s + 0.5 * busy.baseline_rows[0].throughput_tok_s
    assert q.gain == pytest.approx(thr / base, rel=1e-12)
    arrival = parse_scenario({"hardware": "h100-sxm", "model": "llama-3.1-8b", "drafts": ["eagle3"], "max_k": 6,
                              "load": {"arrival_rate_rps": 4.0, "prompt_tokens": 1024, "output_tokens": 256}}, "x")
    pa = plan(arrival)
    bands = Policy.of_ranges(0, [(1, 3, 5), (4, 256, 2)])
    qa = under_policy(pa, pa.scenario.drafts[0], bands)
    row = qa.buckets[0]
    assert qa.arrival is not None and row.k == bands.k_for_batch(row.bucket.batch)
    assert qa.gain == pytest.approx(qa.arrival.baseline_ms_per_token / qa.arrival.ms_per_token)

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from specsim.cli.main import main
from specsim.cost.forward import breakdown
from specsim.cost.ops import make_shape
from specsim.errors import SpecsimError
from specsim.plan.arrival import solve_concurrency
from specsim.plan.decide import target_of
from specsim.plan.optimize import plan
from specsim.plan.result import BandDecision
from specsim.plan.summary import plan_dict
from specsim.scenario.scenario import load_scenario, parse_scenario

SCENARIOS = sorted((Path(__file__).resolve().parents[2] / "scenarios").glob("*.yaml"))


def _cli_json(capsys, *args: str) -> dict:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out, err = capsys.readouterr()
    assert exc.value.code == 0, err
    return json.loads(out)


def test_six_scenarios_bundled() -> None:
    assert len(SCENARIOS) >= 6


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_plan_equals_evaluate_for_every_bucket(path: Path, capsys) -> None:
    """One model, two routes: each bucket's figures are what `specsim evaluate` gives there."""
    data = _cli_json(capsys, "plan", str(path), "--format", "json")
    s = load_scenario(path)
    assert data["buckets"]
    for row in data["buckets"]:
        d = next((d for d in s.drafts if d.label == row["draft"]), None)
        args = ["evaluate", "-H", s.hardware.name, "-m", s.model.name, "--tp", str(s.tp), "--dtype", s.weight_dtype,
                "--kv-dtype", s.kv_dtype, "--batch", str(row["batch"]), "--context", str(row["context"]),
                "--k", str(row["k"]), "--format", "json"]
        if d is None:  # plain decoding was best: evaluate any draft at k = 0
            d = s.drafts[0]
        if d.model is not None:
            args += ["--draft", d.model.name] + (["--draft-tp", str(d.draft_tp)] if d.draft_tp else [])
        else:
            args += ["--draft", d.method]
        if d.acceptance.source.startswith("alpha="):
            args += ["--alpha", str(d.acceptance.tail)]
        if row["num_draft_tokens"]:  # a tree the planner chose
            args += ["--topk", str(row["topk"]), "--num-draft-tokens", str(row["num_draft_tokens"])]
        ev = _cli_json(capsys, *args)
        for f in ("tokens_per_step", "step_ms", "baseline_step_ms", "speedup", "throughput_tok_s", "ms_per_token"):
            assert ev[f] == pytest.approx(row[f], rel=1e-9), (path.stem, row["bucket"], f)


def _single(batch: int, context: int) -> dict:
    s = parse_scenario({"hardware": "h200", "model": "llama-3.1-70b", "tp": 8, "kv_dtype": "fp8",
                        "drafts": [{"method": "eagle3", "acceptance": {"alpha": 0.3}}],
                        "load": {"buckets": [{"batch": batch, "context": context}]}}, "test")
    return plan_dict(plan(s))["buckets"][0]


def test_context_matters_long_contexts_keep_speculation_on() -> None:
    """8x H200, Llama-3.1-70B, a weak draft (alpha 0.3): at some batch, off at 2k but on at 32k.

    Why, from the op split of the verification pass: at 2k the pass is dominated by the linear
    layers, which at 128 x 2 tokens have left the memory-bound region, so the extra verified token
    costs real compute; at 32k attention over the KV cache dominates, and flash-decoding reads each
    sequence's KV once for all its new tokens, so verifying 2 tokens costs about what 1 does.
    """
    # The first batch (of a grid) where speculation is off at 2k contexts; it must still pay at 32k.
    batch = next(b for b in (32, 48, 64, 96, 128, 160, 192) if _single(b, 2048)["k"] == 0)
    long = _single(batch, 32768)
    assert long["k"] >= 1 and long["speedup"] > 1.05
    s = parse_scenario({"hardware": "h200", "model": "llama-3.1-70b", "tp": 8, "kv_dtype": "fp8",
                        "drafts": ["eagle3"], "load": {"buckets": [{"batch": 128}]}}, "x")
    t = target_of(s)
    share = {}
    growth = {}
    for ctx in (2048, 32768):
        fam = {q: breakdown(t.model, t.hardware, make_shape(batch, [q], ctx, 8, "bf16", "fp8")).by_family()
               for q in (1, 2)}
        total = {q: sum(v for v in fam[q].values())[0] for q in (1, 2)}
        share[ctx] = fam[2]["attention"][0] / total[2]
        growth[ctx] = total[2] / total[1]
    assert share[2048] < 0.3 < 0.5 < share[32768]
    assert growth[32768] < growth[2048]


def test_speculation_off_at_large_batch_short_context() -> None:
    # The seed's "when speculation hurts": a draft model on a 70B target stops paying as batch grows.
    s = load_scenario(next(p for p in SCENARIOS if p.stem == "chat-llama70b-h100"))
    p = plan(s)
    cross = p.crossover["draft:llama-3.2-1b"]
    assert cross is not None and 8 < cross < 512


def test_little_law_fixed_point() -> None:
    """N = lambda W with W = prefill + output x the step's time per token stretched by the prompts' share of the
    GPU (1 / (1 - lambda x prefill)), prefill one pass of the prompt as the engine runs it (the simulator's)."""
    s = load_scenario(next(p for p in SCENARIOS if p.stem == "reasoning-h200"))
    t = target_of(s)
    a = s.arrival
    n, ms = solve_concurrency(t, s.drafts[0], 4, a.rate_rps, a.prompt_tokens, a.output_tokens)
    from specsim.advise.planner import PlannerCost
    from specsim.step.evaluate import config_metrics

    prefill = float(PlannerCost(t, s.drafts[0]).prefill_s(np.array([a.prompt_tokens]),
                                                           np.array([a.prompt_tokens / 2]))[0])
    assert 0.01 < a.rate_rps * prefill < 1  # the prompts take a share of the GPU that matters here
    tpot = float(config_metrics(t, s.drafts[0], 4, n, a.prompt_tokens + a.output_tokens / 2).ms_per_token) / 1e3
    seen = tpot / (1 - a.rate_rps * prefill)
    assert n == pytest.approx(a.rate_rps * (prefill + a.output_tokens * seen), rel=1e-3)  # N = lambda W
    assert ms == pytest.approx(seen * 1e3, rel=1e-3)
    base_n, _ = solve_concurrency(t, s.drafts[0], 0, a.rate_rps, a.prompt_tokens, a.output_tokens)
    assert n < base_n  # speculation shortens requests, so fewer are in flight


def test_prompts_that_fill_the_gpu_are_not_servable() -> None:
    """At a rate whose prompts alone take all of the GPU's time no concurrency serves it (the old model, without
    prefill in the decode's time, served 41 requests/s of 1.1k-token prompts on one H100 for an 8B model)."""
    s = parse_scenario({"hardware": "h100-sxm", "model": "llama-3.1-8b", "drafts": ["eagle3"],
                        "load": {"arrival_rate_rps": 1.0, "prompt_tokens": 1100, "output_tokens": 256}}, "x")
    t = target_of(s)
    from specsim.plan.arrival import prefill_time_s

    full = 1.0 / prefill_time_s(t, 1100)  # requests/s whose prompts fill the GPU
    assert solve_concurrency(t, s.drafts[0], 0, 1.02 * full, 1100, 256) is None
    assert solve_concurrency(t, s.drafts[0], 0, 0.5 * full, 1100, 256) is not None


def test_memory_is_checked() -> None:
    """A load that does not fit even without speculation is refused, naming the bucket (never planned)."""
    s = parse_scenario({"hardware": "h100-sxm", "model": "llama-3.1-8b", "drafts": ["eagle3"],
                        "load": {"buckets": [{"batch": 64, "context": 131072}]}}, "x")
    with pytest.raises(SpecsimError, match=r"does not fit.*bucket bucket0"):
        plan(s)


@pytest.mark.parametrize(("patch", "message"), [
    ({"hardware": "h300"}, re.escape("unknown hardware 'h300'")),
    ({"objective": "fast"}, re.escape("'objective' must be one of throughput, latency, slo")),
    ({"objective": "slo"}, re.escape("needs field 'slo_ms_per_token'")),
    ({"drafts": ["warp"]}, re.escape("drafts[0]: unknown draft 'warp'")),
    ({"load": {"buckets": [{"batch": 0}]}}, re.escape("load.buckets[0]: field 'batch' must be in")),
    ({"load": {"buckets": [{"batch": 8, "context": "long"}]}}, r"context.* must be .*'long'"),
    ({"tp": "eight"}, re.escape("field 'tp' must be a number")),
    ({"colour": "red"}, r"unknown field.*colour"),
])
def test_malformed_scenarios(patch: dict, message: str) -> None:
    """A bad scenario is refused in one message that starts with the file and names the field and the value."""
    base = {"hardware": "h100-sxm", "model": "llama-3.1-8b", "drafts": ["eagle3"],
            "load": {"buckets": [{"batch": 8}]}}
    with pytest.raises(SpecsimError) as exc:
        parse_scenario({**base, **patch}, "bad.yaml")
    assert re.search(message, str(exc.value)) and str(exc.value).startswith("bad.yaml"), str(exc.value)


def test_malformed_yaml_cli_exit_2(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("hardware: h100-sxm\nmodel: [unclosed\n")
    with pytest.raises(SystemExit) as exc:
        main(["plan", str(bad)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "bad.yaml" in err and err.count("\n") == 1


def test_engine_configs_follow_policy(capsys) -> None:
    data = _cli_json(capsys, "plan", str(next(p for p in SCENARIOS if p.stem == "chat-llama70b-h100")),
                     "--format", "json")
    cfg = data["engine_configs"]
    vllm = cfg["vllm"]["--speculative-config"]
    assert vllm["method"] == "eagle3"
    sched = vllm["num_speculative_tokens_per_batch_size"]
    assert [s[2] for s in sched] == sorted((s[2] for s in sched), reverse=True)  # k never rises with load
    assert vllm["num_speculative_tokens"] == max(s[2] for s in sched)
    trt = cfg["trtllm"]
    on = [seg for seg in data["policy"] if seg["k"] > 0]
    assert trt["max_concurrency"] == on[-1]["batch_to"] and trt["decoding_type"] == "Eagle"
    # SGLang: one server configuration per band of the policy; num_draft_tokens counts the root
    sg = cfg["sglang"]
    bands = sg.get("by_batch", [sg])
    assert len(bands) == len(on)
    for band, seg in zip(bands, on, strict=True):
        assert band["--speculative-algorithm"] == "EAGLE3" and band["--speculative-num-steps"] == seg["k"]
        assert band["--speculative-num-draft-tokens"] == (seg["num_draft_tokens"] or seg["k"]) + 1
    # vLLM's dynamic speculative decoding profile: step ms per (batch, drafts), unconditional rates
    dyn = cfg["vllm"]["dynamic_speculative_config"]
    rates = dyn["acceptance_rate_per_pos"]
    assert len(rates) == dyn["max_num_speculative_tokens"] and rates == sorted(rates, reverse=True)
    for row in dyn["batch_stats"].values():
        ms = [row[k] for k in sorted(row, key=int)]
        assert ms == sorted(ms)  # a step with more drafts never costs less


def test_sglang_tree_bands_carry_the_backend_caveat() -> None:
    """SGLang runs topk > 1 on other kernels than chains (FlashInfer instead of FA3 on Hopper), which the
    model does not price: a tree band's SGLang flags carry the caveat, a chain's do not."""
    from specsim.engines.configs.sglang import SGLANG_TREE_CAVEAT
    from specsim.plan.engine_configs import engine_configs

    tree = engine_configs("eagle3", [{"batch_from": 1, "batch_to": 8, "k": 5, "topk": 4, "num_draft_tokens": 12},
                                     {"batch_from": 9, "batch_to": 64, "k": 3}])
    chain = engine_configs("eagle3", [{"batch_from": 1, "batch_to": 64, "k": 3}])
    assert tree["sglang"]["caveat"] == SGLANG_TREE_CAVEAT and "FlashInfer" in SGLANG_TREE_CAVEAT
    assert tree["sglang"]["--speculative-eagle-topk"] == 4
    assert "caveat" not in chain["sglang"] and chain["sglang"]["--speculative-eagle-topk"] == 1


def test_sweep_equals_config_metrics() -> None:
    from specsim.plan.sweep import sweep_arrays
    from specsim.step.evaluate import config_metrics

    s = load_scenario(next(p for p in SCENARIOS if p.stem == "chat-llama70b-h100"))
    t = target_of(s)
    b, c = np.array([1.0, 64.0, 256.0]), np.array([1024.0, 8192.0])
    for d in s.drafts:
        arr = sweep_arrays(t, d, 6, b, c)
        for k in (0, 3, 6):
            m = config_metrics(t, d, k, b[:, None], c[None, :])
            assert arr["step_ms"][0, k] == pytest.approx(m.step_ms, rel=1e-12)
            assert arr["throughput_tok_s"][0, k] == pytest.approx(m.throughput_tok_s, rel=1e-12)


def test_sweep_cli_writes_tidy_csv(tmp_path: Path, capsys) -> None:
    import pandas as pd

    out = tmp_path / "s.csv"
    with pytest.raises(SystemExit) as exc:
        main(["sweep", str(SCENARIOS[0]), "-o", str(out), "--batch", "1,8", "--context", "2048",
              "--alpha-grid", "0.5,0.9", "--max-k", "3"])
    assert exc.value.code == 0
    df = pd.read_csv(out)
    s = load_scenario(SCENARIOS[0])
    assert len(df) == len(s.drafts) * 2 * 4 * 2 * 1
    hi = df[(df.alpha == 0.9) & (df.k == 3)].tokens_per_step
    assert np.allclose(hi, (1 - 0.9**4) / (1 - 0.9))


def test_objectives_at_fixed_batch_and_slo_flag() -> None:
    """At a fixed batch, throughput = B / ms_per_token, so the throughput and latency objectives pick
    the same configuration; an SLO the bucket cannot meet is flagged rather than silently missed."""
    base = {"hardware": "h100-sxm", "model": "llama-3.1-8b", "max_k": 6,
            "drafts": [{"method": "draft_model", "model": "llama-3.2-1b", "acceptance": {"alpha": 0.6}}],
            "load": {"buckets": [{"batch": 96, "context": 2048}, {"batch": 2, "context": 2048}]}}
    thr = plan_dict(plan(parse_scenario({**base, "objective": "throughput"}, "x")))
    lat = plan_dict(plan(parse_scenario({**base, "objective": "latency"}, "x")))
    assert [b["k"] for b in thr["buckets"]] == [b["k"] for b in lat["buckets"]]
    r = thr["buckets"][0]
    assert r["throughput_tok_s"] == pytest.approx(r["batch"] * 1e3 / r["ms_per_token"])
    quiet, busy = thr["buckets"][1]["ms_per_token"], thr["buckets"][0]["ms_per_token"]
    slo = plan(parse_scenario({**base, "objective": "slo", "slo_ms_per_token": (quiet + busy) / 2}, "x"))
    assert any("bucket bucket0 misses the SLO" in n for n in slo.notes)
    assert not any("bucket1" in n for n in slo.notes)


def test_memory_per_gpu_by_hand() -> None:
    from specsim.drafts.build import make_draft
    from specsim.step.evaluate import memory_per_gpu

    s = parse_scenario({"hardware": "h100-sxm", "model": "llama-3.1-70b", "tp": 8, "drafts": ["eagle3"],
                        "load": {"buckets": [{"batch": 10}]}}, "x")
    t = target_of(s)
    mem = memory_per_gpu(t, make_draft("none", t.model), 0, 10, 1000)
    # 8 KV heads over 8 GPUs: one head each, 80 layers x (K, V) x 128 dims x 2 bytes per token
    assert mem.kv_cache == pytest.approx(10 * 1001 * 80 * 2 * 128 * 2)
    assert mem.weights == pytest.approx(t.model.n_params() * 2 / 8)
    # vLLM: total_gpu_memory (79.19 GiB on an H100) x gpu_memory_utilization
    assert mem.capacity == pytest.approx(79.19 * 2**30 * 0.9)
    # reserves at tp 8: non-torch 0.16 + NCCL/custom all-reduce 1.8 + CUDA graphs 0.25 GiB
    assert mem.reserved == pytest.approx((0.16 + 1.8 + 0.25) * 2**30)


def test_activation_peak_matches_vllm_log_for_llama3_8b() -> None:
    """vLLM's profiling log for Llama-3-8B on one H100 (vllm-project/vllm#10511): "PyTorch activation
    peak memory 1.26 GiB" at the default 8192-token budget; the formula's widest tensors give 1.18."""
    from specsim.cost.model import load_model
    from specsim.step.memory import activation_peak_bytes

    m = load_model("llama-3-8b")
    peak = activation_peak_bytes(m.hidden, m.intermediate, m.n_heads, m.n_kv_heads, m.head_dim, m.vocab, 1)
    assert peak / 2**30 == pytest.approx(1.26, rel=0.1)


# ---------------------------------------------------------------------------------------------
# trees, the acceptance band, like-for-like headlines, the prior's note everywhere
# ---------------------------------------------------------------------------------------------


def _tree_scenario(**extra) -> dict:
    """Trees are searched where the engine runs a tree per batch band (SGLang: plan/deploy.py)."""
    return {"hardware": "h100-sxm", "model": "llama-3.1-8b", "max_k": 6, "engine": "sglang",
            "drafts": [{"method": "eagle3", "acceptance": {"alpha": 0.7}}],
            "load": {"buckets": [{"name": "quiet", "batch": 1, "context": 2048},
                                 {"name": "busy", "batch": 64, "context": 2048}]}, **extra}


def test_plan_picks_bigger_trees_at_batch_1_than_at_batch_64() -> None:
    """The same acceptance (alpha 0.7) at batch 1 and 64: verification is nearly free at batch 1, so the
    plan verifies more tokens there (a tree) than at batch 64, where each extra token costs compute."""
    p = plan(parse_scenario(_tree_scenario(), "x"))
    quiet, busy = (next(bp for bp in p.buckets if bp.bucket.name == n) for n in ("quiet", "busy"))
    verify = {bp.bucket.name: 1 + (bp.num_draft_tokens or bp.k) for bp in (quiet, busy)}
    assert quiet.num_draft_tokens is not None and quiet.topk > 1  # a tree at batch 1
    assert verify["quiet"] > verify["busy"]
    # the policy never grows with load (ordered by verification tokens)
    tokens = [seg.verify_tokens for seg in p.policy.schedule if seg.k >= 0]
    assert tokens == sorted(tokens, reverse=True)


def test_trees_only_where_the_engine_runs_them_per_batch() -> None:
    """vLLM changes only a chain's length with batch: its plan searches chains (and says so in its details),
    and its table, policy and engine configs name the same chain; SGLang's plan keeps its low-load tree, and
    SGLang's flags for that band are the tree's."""
    vllm = plan(parse_scenario(_tree_scenario(engine="vllm"), "x"))
    assert all(bp.num_draft_tokens is None for bp in vllm.buckets)
    assert all(seg.num_draft_tokens is None for seg in vllm.policy.schedule)
    assert any("trees not searched for eagle3" in d for d in vllm.details)
    sg = plan(parse_scenario(_tree_scenario(), "x"))
    quiet = next(bp for bp in sg.buckets if bp.bucket.name == "quiet")
    assert quiet.num_draft_tokens and not any("trees not searched" in d for d in sg.details)
    flags = plan_dict(sg)["engine_configs"]["sglang"]
    band = next(b for b in flags.get("by_batch", [flags]) if b.get("batch_from", 1) == 1)
    assert band["--speculative-eagle-topk"] == quiet.topk
    assert band["--speculative-num-draft-tokens"] == quiet.num_draft_tokens + 1  # SGLang counts the root
    # the tree costs what its verification costs: the chain the vLLM plan runs at batch 1 is no faster there
    chain = next(bp for bp in vllm.buckets if bp.bucket.name == "quiet")
    assert quiet.rows[0].throughput_tok_s >= chain.rows[0].throughput_tok_s * (1 - 1e-9)


def test_chosen_tree_tokens_per_step_by_an_independent_route() -> None:
    """The planner's tokens per step for its tree equals building EAGLE-2's tree from the hazard
    sibling probabilities and summing path probabilities (trees.Tree.expected_tokens)."""
    from specsim.acceptance.sibling_probs import sibling_probs_hazard
    from specsim.acceptance.tree_shapes import eagle2_tree

    p = plan(parse_scenario(_tree_scenario(), "x"))
    bp = next(bp for bp in p.buckets if bp.num_draft_tokens)
    probs = sibling_probs_hazard(np.full(bp.k, 0.7), bp.topk)
    tree = eagle2_tree(probs, bp.topk, bp.k, bp.num_draft_tokens)
    assert bp.rows[0].tokens_per_step == pytest.approx(float(tree.expected_tokens(probs)), rel=1e-12)


def test_measured_acceptance_has_no_band_and_no_prior_note() -> None:
    p = plan(parse_scenario(_tree_scenario(), "x"))
    assert p.band is None and not any("prior" in n for n in p.notes)


@pytest.mark.parametrize("objective", ["throughput", "latency", "slo"])
def test_prior_note_and_band_in_every_objective(objective: str) -> None:
    extra = {"objective": objective, "slo_ms_per_token": 20.0} if objective == "slo" else {"objective": objective}
    s = parse_scenario({"hardware": "h100-sxm", "model": "llama-3.1-8b", "drafts": ["eagle3"], "max_k": 6,
                        "load": {"buckets": [{"batch": 4, "context": 2048}]}, **extra}, "x")
    p = plan(s)
    data = plan_dict(p)
    assert any("acceptance of eagle3" in n and "measure yours" in n for n in p.notes)
    assert data["acceptance"]["eagle3"]["prior"] and data["acceptance"]["eagle3"]["entry"]
    a = data["acceptance"]["eagle3"]
    assert a["tau_low"] < a["tau_central"] < a["tau_high"]
    assert p.band is not None and p.band.low.gain <= p.band.central.gain <= p.band.high.gain
    assert "acceptance band" in data["recommendation"] or "measure first" in data["recommendation"]


def test_recommendation_says_measure_first_when_the_band_flips_it() -> None:
    """Near a draft model's crossover the prior's low end loses where its central case pays: the plan
    says the answer depends on acceptance; at batch 1 the same draft pays across the band."""
    def rec(batch: int) -> tuple[BandDecision | None, str]:
        s = parse_scenario({"hardware": "h100-sxm", "model": "llama-3.1-70b", "tp": 8, "max_k": 6,
                            "drafts": [{"method": "draft_model", "model": "llama-3.2-1b", "draft_tp": 1}],
                            "load": {"buckets": [{"batch": batch, "context": 2048}]}}, "x")
        p = plan(s)
        return p.band, plan_dict(p)["recommendation"]

    band, text = rec(1)
    assert band is not None and band.robust and "holds across" in text
    found = False
    for batch in (32, 48, 64, 96, 128, 160, 192, 256):
        band, text = rec(batch)
        assert band is not None
        if not band.robust:
            assert "depends on acceptance" in text and (
                "measure first" in text or "tokens per step at k = 4" in text)
            found = True
            break
    assert found


def test_arrival_headline_compares_like_with_like() -> None:
    """reasoning-h200: the headline's ratio is at the same arrival rate (ms/token with and without, each at
    its own Little's-law concurrency) and states the same-batch speedup, which is the table's."""
    s = load_scenario(next(p for p in SCENARIOS if p.stem == "reasoning-h200"))
    p = plan(s)
    data = plan_dict(p)
    a = data["arrival"]
    row = data["buckets"][0]
    assert a["gain_same_rate"] == pytest.approx(a["baseline_ms_per_token"] / a["ms_per_token"])
    assert a["speedup_same_batch"] == pytest.approx(row["speedup"])
    text = data["recommendation"]
    assert f"{a['gain_same_rate']:.2f}x" in text and f"{a['speedup_same_batch']:.2f}x" in text
    assert "same" in text and "in flight" in text
    assert any("measure yours" in n for n in p.notes)  # a prior decided it: its note is there in arrival mode
    assert p.band is not None and "acceptance" in text


def test_chat_plan_no_longer_rides_a_flat_eagle3_rate() -> None:
    """The old flat 0.895 EAGLE-3 default gave 6.0 tokens at k = 8 and 4.5x at batch 8; the sourced prior
    (SpecBundle / vLLM EAGLE-3 chains on Llama-3 targets) gives well under that."""
    data = plan_dict(plan(load_scenario(next(p for p in SCENARIOS if p.stem == "chat-llama70b-h100"))))
    night = next(r for r in data["buckets"] if r["bucket"] == "night")
    assert night["tokens_per_step"] < 5.0 and night["speedup"] < 3.5


def test_parallel_drafter_cost_is_flat_in_k() -> None:
    """P-EAGLE drafts k tokens in one pass: drafting 7 costs well under 7x drafting 1 (an autoregressive
    EAGLE-3 head pays about k passes)."""
    from specsim.drafts.build import make_draft
    from specsim.step.evaluate import config_metrics

    s = parse_scenario({"hardware": "h100-sxm", "model": "llama-3.1-8b", "drafts": ["p_eagle"],
                        "load": {"buckets": [{"batch": 8}]}}, "x")
    t = target_of(s)
    pe, e3 = make_draft("p_eagle", t.model), make_draft("eagle3", t.model)
    ratio_pe = float(config_metrics(t, pe, 7, 8, 2048).draft_ms / config_metrics(t, pe, 1, 8, 2048).draft_ms)
    ratio_e3 = float(config_metrics(t, e3, 7, 8, 2048).draft_ms / config_metrics(t, e3, 1, 8, 2048).draft_ms)
    assert ratio_pe < 1.6 < 3.0 < ratio_e3
    assert plan(s).buckets[0].k >= 1


def test_scenario_task_temperature_and_windowed_acceptance(tmp_path: Path) -> None:
    """A scenario's task and temperature choose the prior (code accepts more than chat for EAGLE-3
    heads, T=1 less than greedy); a draft's acceptance from two scrapes is the window between them."""
    base = {"hardware": "h100-sxm", "model": "llama-3.1-8b", "drafts": ["eagle3"],
            "load": {"buckets": [{"batch": 4}]}}
    tau = {key: parse_scenario({**base, **extra}, "x").drafts[0].tokens_per_step(4)
           for key, extra in (("code", {"task": "code", "temperature": 0}),
                              ("chat", {"task": "chat", "temperature": 0}),
                              ("chat-t1", {"task": "chat", "temperature": 1.0}))}
    assert tau["code"] > tau["chat"] > tau["chat-t1"]
    before, after = tmp_path / "before.txt", tmp_path / "after.txt"
    before.write_text('vllm:spec_decode_num_drafts_total 100\nvllm:spec_decode_num_draft_tokens_total 300\n'
                      'vllm:spec_decode_num_accepted_tokens_total 90\n')
    after.write_text('vllm:spec_decode_num_drafts_total 300\nvllm:spec_decode_num_draft_tokens_total 900\n'
                     'vllm:spec_decode_num_accepted_tokens_total 390\n')
    scen = tmp_path / "s.yaml"
    scen.write_text("hardware: h100-sxm\nmodel: llama-3.1-8b\nload: {buckets: [{batch: 4}]}\n"
                    "drafts:\n  - {method: eagle3, acceptance: {before: before.txt, after: after.txt}}\n")
    d = load_scenario(scen).drafts[0]
    # window: 200 drafts, 300 accepted -> 2.5 tokens per step at k = 3 (the cumulative scrape says 2.3)
    assert float(d.acceptance.mean_tokens(3)) == pytest.approx(2.5) and d.prior is None
    with pytest.raises(SpecsimError, match="temperature"):
        parse_scenario({**base, "temperature": 5}, "x")
    with pytest.raises(SpecsimError, match="unknown task"):
        parse_scenario({**base, "task": "poetry slam"}, "x")

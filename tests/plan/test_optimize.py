from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from specsim.cli.main import main
from specsim.cost.forward import breakdown
from specsim.cost.ops import make_shape
from specsim.errors import SpecsimError
from specsim.plan.optimize import plan, solve_concurrency, target_of
from specsim.plan.scenario import load_scenario, parse_scenario
from specsim.plan.summary import plan_dict

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
    s = load_scenario(next(p for p in SCENARIOS if p.stem == "reasoning-h200"))
    t = target_of(s)
    a = s.arrival
    n, _ = solve_concurrency(t, s.drafts[0], 4, a.rate_rps, a.prompt_tokens, a.output_tokens)
    from specsim.cost.forward import forward_time_s
    from specsim.plan.evaluate import config_metrics

    prefill = float(forward_time_s(t.hardware, t.model, 1, a.prompt_tokens, a.prompt_tokens / 2, t.tp,
                                   t.weight_dtype, t.kv_dtype))
    tpot = float(config_metrics(t, s.drafts[0], 4, n, a.prompt_tokens + a.output_tokens / 2).ms_per_token) / 1e3
    assert n == pytest.approx(a.rate_rps * (prefill + a.output_tokens * tpot), rel=1e-3)  # N = lambda W
    base_n, _ = solve_concurrency(t, s.drafts[0], 0, a.rate_rps, a.prompt_tokens, a.output_tokens)
    assert n < base_n  # speculation shortens requests, so fewer are in flight


def test_memory_is_checked() -> None:
    s = parse_scenario({"hardware": "h100-sxm", "model": "llama-3.1-8b", "drafts": ["eagle3"],
                        "load": {"buckets": [{"batch": 64, "context": 131072}]}}, "x")
    p = plan(s)
    assert not p.buckets[0].fits and any("do not fit" in n for n in p.notes)


@pytest.mark.parametrize(("patch", "message"), [
    ({"hardware": "h300"}, "unknown hardware 'h300'"),
    ({"objective": "fast"}, "'objective' must be one of throughput, latency, slo"),
    ({"objective": "slo"}, "needs field 'slo_ms_per_token'"),
    ({"drafts": ["warp"]}, "drafts[0]: unknown draft 'warp'"),
    ({"load": {"buckets": [{"batch": 0}]}}, "load.buckets[0]: field 'batch' must be in"),
    ({"load": {"buckets": [{"batch": 8, "context": "long"}]}}, "'context' must be a token count"),
    ({"tp": "eight"}, "field 'tp' must be a number"),
    ({"colour": "red"}, "unknown field(s) ['colour']"),
])
def test_malformed_scenarios(patch: dict, message: str) -> None:
    base = {"hardware": "h100-sxm", "model": "llama-3.1-8b", "drafts": ["eagle3"],
            "load": {"buckets": [{"batch": 8}]}}
    with pytest.raises(SpecsimError) as exc:
        parse_scenario({**base, **patch}, "bad.yaml")
    assert message in str(exc.value) and str(exc.value).startswith("bad.yaml")


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
    assert trt["max_concurrency"] == sched[-1][1] and trt["decoding_type"] == "Eagle"
    assert cfg["sglang"]["--speculative-algorithm"] == "EAGLE3"
    assert cfg["sglang"]["--speculative-num-draft-tokens"] == cfg["sglang"]["--speculative-num-steps"] + 1


def test_sweep_equals_config_metrics() -> None:
    from specsim.plan.evaluate import config_metrics
    from specsim.plan.sweep import sweep_arrays

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
        main(["sweep", str(SCENARIOS[0]), "-o", str(out), "--batches", "1,8", "--contexts", "2048",
              "--alphas", "0.5,0.9", "--max-k", "3"])
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
    from specsim.plan.evaluate import memory_per_gpu

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
    from specsim.plan.memory import activation_peak_bytes

    m = load_model("llama-3-8b")
    peak = activation_peak_bytes(m.hidden, m.intermediate, m.n_heads, m.n_kv_heads, m.head_dim, m.vocab, 1)
    assert peak / 2**30 == pytest.approx(1.26, rel=0.1)

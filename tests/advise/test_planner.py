"""The simulation on the real planner: step costs equal `plan.evaluate` (through `specsim evaluate`'s route too),
the constant-concurrency floor against `step_arrays`, KV capacity from the memory model, the workload mix's
acceptance from the sourced priors, and policies as the planner's segments."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.acceptance.priors import lookup
from specsim.advise.planner import (
    PlannerCost,
    acceptance_mix,
    analytic_schedule,
    chain,
    kv_capacity_tokens,
)
from specsim.cost.forward import forward_time_s
from specsim.drafts.build import make_draft
from specsim.drafts.priors import REFERENCE_K
from specsim.plan.decide import target_of
from specsim.scenario.scenario import parse_scenario
from specsim.scenario.serving import EngineConfig
from specsim.scenario.traffic import Requests
from specsim.scenario.workload import AcceptanceMix, Workload
from specsim.simulate.engine import simulate
from specsim.step.evaluate import Target, config_metrics, memory_per_gpu, step_arrays
from specsim.step.policy import Policy


@pytest.fixture(scope="module")
def eight_b() -> tuple[Target, list]:
    s = parse_scenario({"hardware": "h100-sxm", "model": "llama-3.1-8b", "drafts": [
        "eagle3", {"method": "draft_model", "model": "llama-3.2-1b", "acceptance": {"alpha": 0.75}}],
        "load": {"buckets": [{"batch": 8, "context": 2048}]}}, "t.yaml")
    return target_of(s), [chain(d) for d in s.drafts]


def test_decode_equals_step_arrays_and_evaluate(eight_b: tuple[Target, list]) -> None:
    t, drafts = eight_b
    rng = np.random.default_rng(0)
    b = rng.integers(1, 257, 40).astype(float)
    ctx = rng.uniform(0, 20_000, 40)
    for d in drafts:
        cost = PlannerCost(t, d)
        for k in (0, 1, 3, 5):
            got = cost.decode_s(b, ctx, np.full(40, k))
            ref = step_arrays(t, d, k, b, ctx, 1.0).step_time_s
            np.testing.assert_allclose(got, ref, rtol=1e-12)
            # the route `specsim evaluate` takes: config_metrics' step time (k = 0: the plain step)
            np.testing.assert_allclose(got, config_metrics(t, d, k, b, ctx).step_time_s, rtol=1e-12)
        plain = make_draft("none", t.model)
        np.testing.assert_allclose(cost.decode_s(b, ctx, np.zeros(40)),
                                   config_metrics(t, plain, 0, b, ctx).baseline_step_time_s, rtol=1e-12)


def test_prefill_is_one_forward_pass(eight_b: tuple[Target, list]) -> None:
    t, drafts = eight_b
    cost = PlannerCost(t, drafts[0])
    tok = np.array([0.0, 256.0, 1024.0, 4096.0])
    got = cost.prefill_s(tok, tok / 2)
    assert got[0] == 0.0 and (np.diff(got) > 0).all()
    # large chunks run outside CUDA graphs: the kernels' time, within the launch overheads of the roofline's
    ref = forward_time_s(t.hardware, t.model, 1, tok[1:], tok[1:] / 2, t.tp, t.weight_dtype, t.kv_dtype,
                         t.engine.allreduce)
    np.testing.assert_allclose(got[1:], ref, rtol=0.05)


@pytest.mark.parametrize("k", [0, 3])
def test_constant_concurrency_floor_against_the_planner(eight_b: tuple[Target, list], k: int) -> None:
    """Floor: n requests present at t = 0, acceptance 1: every pure decode step lasts step_arrays(n, ctx, k)
    (within 2%), through the step table's interpolation over context."""
    t, drafts = eight_b
    worst = 0.0
    for d in drafts:
        cost = PlannerCost(t, d)
        for n, prompt in ((1, 500), (16, 3000), (64, 12_000), (200, 1500)):
            res = simulate(Requests.at_once(n, prompt, 201), EngineConfig(256, 10**7, 10**8, Policy.static(k)),
                           cost, AcceptanceMix.constant(1.0))
            st = res.steps
            idx = np.flatnonzero((st.decode_batch == n) & (st.prefill_tokens == 0))
            assert len(idx) == 200 // (k + 1)
            ctx = prompt + np.arange(len(idx)) * (k + 1.0)
            ref = step_arrays(t, d, k, float(n), ctx, 1.0).step_time_s
            worst = max(worst, float(np.abs(st.duration_s[idx] / ref - 1).max()))
            # the first step is the prefill of every prompt together: one pass of n x prompt tokens
            assert st.duration_s[0] == pytest.approx(float(cost.prefill_s(np.array(n * prompt), np.array(prompt / 2))),
                                                     rel=0.01)
    assert worst < 0.02


def test_kv_capacity_matches_the_memory_check(eight_b: tuple[Target, list]) -> None:
    t, drafts = eight_b
    ctx = 2000.0
    plain = kv_capacity_tokens(t, None, 0, ctx)
    seqs = plain // (ctx + 1)  # sequences of ctx tokens (+ the token verified) that fit, by the tokens counted
    none = make_draft("none", t.model)
    assert bool(memory_per_gpu(t, none, 0, seqs, ctx).fits)
    assert not bool(memory_per_gpu(t, none, 0, seqs + 2, ctx).fits)
    for d in drafts:  # a draft's weights and KV leave less for the target's KV
        spec = kv_capacity_tokens(t, d, 4, ctx)
        assert spec < plain
        seqs_d = spec // (ctx + 5)
        assert bool(memory_per_gpu(t, d, 4, seqs_d, ctx).fits)
        assert not bool(memory_per_gpu(t, d, 4, seqs_d + 2, ctx).fits)


def test_acceptance_from_alphas_task_prior_and_the_draft(eight_b: tuple[Target, list]) -> None:
    t, drafts = eight_b
    eagle = drafts[0]
    mix, sources = acceptance_mix(eagle, t, [Workload("given", 0.5, (0.9, 0.8)), Workload("code", 0.3, None, "code"),
                                             Workload("rest", 0.2)], depth=4)
    given, code, rest = mix.classes
    assert given.conditional(4).tolist() == [0.9, 0.8, 0.8, 0.8]
    prior = lookup("eagle3", target=t.model, task="code", shape=REFERENCE_K["eagle3"])
    np.testing.assert_allclose(code.conditional(4), prior.conditional_rates[:4])
    np.testing.assert_allclose(rest.conditional(4), eagle.acceptance.rates_for(4))
    assert "task code" in sources[1] and mix.shares.tolist() == pytest.approx([0.5, 0.3, 0.2])
    # a draft model with a measured alpha: the workload without a task keeps it, flat
    mix_d, _ = acceptance_mix(drafts[1], t, (), depth=3)
    assert mix_d.classes[0].conditional(3).tolist() == [0.75, 0.75, 0.75]


def test_policy_bands_round_trip() -> None:
    for p in (Policy.static(4), Policy.static(3, 64), Policy(0, ((1, 16, 4), (17, 64, 2))),
              Policy(1, ((1, 8, 5),), 100), Policy.off()):
        segs = p.as_bands(256).schedule
        assert segs[0].batch_from == 1 and segs[-1].batch_to == 256
        back = p.as_bands(256).as_run()
        np.testing.assert_array_equal(back.k_table(256), p.k_table(256))
        assert Policy.parse(p.label).k_table(256).tolist() == p.k_table(256).tolist()


def test_analytic_schedule_is_the_fastest_k_at_each_batch(eight_b: tuple[Target, list]) -> None:
    t, drafts = eight_b
    d = drafts[0]
    sched = analytic_schedule(t, d, 6, 256, 1500.0)
    table = sched.k_table(256)
    assert (np.diff(table[1:]) <= 0).all()  # never grows with the batch
    for b in (1, 4):  # at low batch: the k with the most tokens per second, by config_metrics (the evaluate route)
        thr = [float(config_metrics(t, d, k, float(b), 1500.0).throughput_tok_s) for k in range(7)]
        assert thr[int(table[b])] >= max(thr) * 0.99


def test_prefill_runs_in_the_targets_layout() -> None:
    """A prefill pass is priced in the whole layout (it used to see tp alone: all experts on one GPU under DP
    attention), its prompts spread over the DP-attention groups as the decodes are."""
    import numpy as np

    from specsim.advise.planner import PlannerCost
    from specsim.cost.hardware import load_hardware
    from specsim.cost.layout import Layout
    from specsim.cost.model import load_model
    from specsim.drafts.build import make_draft
    from specsim.engines.passes import pass_time_s
    from specsim.step.evaluate import Target

    m, hw = load_model("deepseek-v3"), load_hardware("h200")
    lay = Layout(1, dp=8, ep=8)
    t = Target(hw, m, 1, "fp8_block", layout=lay)
    cost = PlannerCost(t, make_draft({"method": "none"}, m, "test"))
    got = float(cost.prefill_s(np.array(4096.0), np.array(2048.0)))
    want = float(pass_time_s(t.engine, hw, m, 8.0, 512.0, 2048.0, lay, "fp8_block", "bf16"))
    assert got == want
    alone = float(pass_time_s(t.engine, hw, m, 1.0, 4096.0, 2048.0, 1, "fp8_block", "bf16"))
    assert got < 0.5 * alone


def test_kv_capacity_follows_the_engines_max_num_seqs(eight_b: tuple[Target, list]) -> None:
    """vLLM's profiling pass samples max_num_seqs sequences (gpu_model_runner._dummy_sampler_run), their fp32
    logits and the sampler's copy held at the activation peak: a server started with --max-num-seqs 16 holds
    2 x (256 - 16) x (k + 1) x vocab x 4 bytes less than one at vLLM's default 256, and caches that many more
    bytes of KV. By hand for k = 4 (5 tokens verified each) on the 8B target (vocab from its config)."""
    t, drafts = eight_b
    d, ctx = drafts[0], 2000.0
    q = float(d.verify_tokens_per_seq(4))
    per_token = float(memory_per_gpu(t, d, 4, 1.0, ctx).kv_cache + memory_per_gpu(t, d, 4, 1.0, ctx).draft_kv) / (
        ctx + q)
    freed = 2 * (256 - 16) * q * t.model.vocab * 4
    more = kv_capacity_tokens(t, d, 4, ctx, max_num_seqs=16) - kv_capacity_tokens(t, d, 4, ctx)
    assert more == pytest.approx(freed / per_token, abs=1.0)
    assert kv_capacity_tokens(t, d, 4, ctx, max_num_seqs=256) == kv_capacity_tokens(t, d, 4, ctx)

"""Issue 33: the fleet search (plan/fleet_search.py, `specsim fleet`). The answer on a Dask local cluster is the
local one exactly; the winner and its neighbours agree with the planner's own Little's-law solver; the mix's
tokens per step are the planner's workload mix; bad input is one line, exit 2, the nearest name. Prefill/decode
pools (--pd, plan/fleet_pools.py): one xPyD configuration checked by hand, the aggregated rows unchanged beside
them, the cluster's answer still the local one."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from specsim.advise.planner import acceptance_mix
from specsim.drafts.build import make_draft
from specsim.errors import SpecsimError
from specsim.plan.arrival import prefill_time_s
from specsim.plan.capacity import latency_at_rate_ms, solver_max_rate
from specsim.plan.fleet_price import FleetQuestion, FleetRow, Placement, target_for
from specsim.plan.fleet_search import FleetAnswer, Space, mix_tokens, question, search, tasks_of
from specsim.scenario.kv_cache import DEFAULT_KV_LINK_GB_PER_S
from specsim.scenario.scenario import load_scenario
from specsim.scenario.serving import cost_per_mtok_usd
from specsim.step.evaluate import config_metrics, fits
from tests._cli import run

SCENARIO = """\
name: fleet-test
hardware: h100-sxm
model: llama-3.1-8b
tp: 1
objective: slo
slo_ms_per_token: 15
max_k: 3
gpu_hour_usd: 2.5
drafts: [eagle3, ngram]
load: {arrival_rate_rps: 40, prompt_tokens: 1000, output_tokens: 250}
"""
PRICES = {"h100-sxm": 2.5, "l40s": 1.0}
SPACE = Space((("hardware", ("h100-sxm", "l40s")), ("tp", (1, 2)), ("ep", (1,))))
KS = (1, 2, 3)
TASK = 14  # configurations per task: two placements of 7 (plain, 2 drafts x 3 k), so 2 tasks
PD_SPACE = Space((*SPACE.axes, ("pd", (None, (1, 2), (2, 1)))))  # 12 placements: 6 tasks, a ratio's apart


@pytest.fixture(scope="module")
def scenario_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fleet") / "fleet.yaml"
    path.write_text(SCENARIO)
    return path


@pytest.fixture(scope="module")
def local(scenario_file: Path) -> tuple[object, FleetAnswer]:
    s = load_scenario(scenario_file)
    q = question(s, s.drafts, KS, None, PRICES)
    return q, search(q, SPACE, "local", n_jobs=1, task_configs=TASK)


@pytest.fixture(scope="module")
def pools(local: tuple[object, FleetAnswer]) -> FleetAnswer:
    return search(local[0], PD_SPACE, "local", n_jobs=1, task_configs=TASK)  # type: ignore[arg-type]


def test_the_search_prices_every_configuration_once(local: tuple[object, FleetAnswer]) -> None:
    _, ans = local
    assert ans.configurations == 4 * 7 == len(ans.rows) and ans.tasks == 2
    keys = {(r.hardware, r.tp, r.ep, r.draft, r.k) for r in ans.rows}
    assert len(keys) == ans.configurations
    # 10,000 configurations (100 placements of 100) are 20 tasks of 500, a placement never split
    tasks = tasks_of(list(range(100)), 100)
    assert len(tasks) == 20 and [p for t in tasks for p in t] == list(range(100))
    assert tasks_of(list(range(3)), 1000) == [[0], [1], [2]]


def test_cluster_answer_equals_the_local_one(local: tuple[object, FleetAnswer], pools: FleetAnswer) -> None:
    distributed = pytest.importorskip("distributed")
    q, ans = local
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        remote = search(q, SPACE, "dask", c.scheduler_address, task_configs=TASK)  # type: ignore[arg-type]
        remote_pd = search(q, PD_SPACE, "dask", c.scheduler_address, task_configs=TASK)  # type: ignore[arg-type]
    assert remote.backend == "dask" and remote.tasks == 2
    assert remote.best == ans.best and remote.rows == ans.rows  # bit for bit: same best, same table
    # with the pool axis: each task prices its own decode pools, and still the same table bit for bit
    assert remote_pd.tasks == pools.tasks == 6 and remote_pd.rows == pools.rows and remote_pd.best == pools.best


def test_the_pool_axis_leaves_the_aggregated_rows_alone(local: tuple[object, FleetAnswer],
                                                         pools: FleetAnswer) -> None:
    _, ans = local
    assert pools.configurations == 3 * ans.configurations
    assert tuple(r for r in pools.rows if r.layout == "aggregated") == ans.rows  # same rows, same order
    assert {r.layout for r in pools.rows} == {"aggregated", "1P2D", "2P1D"}
    assert all(r.prefill_replicas is None and r.decode_replicas is None for r in ans.rows)
    assert FleetQuestion.__dataclass_fields__["kv_link_gb_s"].default == DEFAULT_KV_LINK_GB_PER_S


def _decode_rps_by_hand(t: object, d: object, k: int, prompt: int, output: int, slo_ms: float) -> float:
    """One decode replica's requests/s within the SLO, prefill excluded: Little's law N = r x output x the step's
    time per token at N, at the largest N (a 1/8-request grid) within the SLO whose KV fits."""
    n = np.arange(1.0, 1024.0, 0.125)
    ctx = prompt + output / 2
    ms = np.asarray(config_metrics(t, d, k, n, ctx).ms_per_token)  # type: ignore[arg-type]
    ok = (ms <= slo_ms) & np.asarray(fits(t, d, k, n, ctx), dtype=bool)  # type: ignore[arg-type]
    i = int(np.flatnonzero(ok)[-1])
    assert i < len(n) - 1  # the SLO (or memory) binds inside the grid
    return float(n[i] / (output * ms[i] / 1e3))


@pytest.mark.parametrize(("pd", "binds"), [((2, 1), "decode"), ((1, 2), "prefill")])
def test_one_pool_configuration_by_hand(local: tuple[object, FleetAnswer], pools: FleetAnswer,
                                        pd: tuple[int, int], binds: str) -> None:
    q, _ = local
    x, y = pd
    r = next(r for r in pools.rows if (r.hardware, r.tp, r.layout, r.draft, r.k) == (
        "h100-sxm", 1, f"{x}P{y}D", "eagle3", 2))
    t = target_for(q, Placement("h100-sxm", 1))  # type: ignore[arg-type]
    d = next(d for d in q.drafts if d.label == "eagle3")  # type: ignore[attr-defined]
    prefill_rps = 0.9 / prefill_time_s(t, 1000)  # a prefill replica: AIConfigurator's 0.9 of 1 / its prefill
    decode_rps = _decode_rps_by_hand(t, d, 2, 1000, 250, 15.0)
    group = min(x * prefill_rps, y * decode_rps)
    assert (x * prefill_rps < y * decode_rps) == (binds == "prefill")
    assert r.capacity_rps * (x + y) == pytest.approx(group, rel=0.01)
    groups = math.ceil(40 / group)  # the fewest x:y groups for 40 requests/s
    assert (r.prefill_replicas, r.decode_replicas, r.replicas) == (groups * x, groups * y, groups * (x + y))
    assert r.gpus == groups * (x + y) * 1 and r.gpus_per_replica == 1 and r.ok
    assert r.usd_per_mtok == pytest.approx(cost_per_mtok_usd(r.gpus, 2.5, 40 * 250))
    # TTFT: the prefill pass plus 1000 tokens x Llama-3.1-8B's bf16 KV (32 layers x 8 KV heads x 128 x 2 (K, V)
    # x 2 bytes = 131,072 B/token) over 43.5 GB/s x 1 GPU = 3.01 ms
    assert r.ttft_ms == pytest.approx(prefill_time_s(t, 1000) * 1e3 + 1000 * 131_072 / 43.5e9 * 1e3, rel=1e-9)
    plain = next(p for p in pools.rows if (p.hardware, p.tp, p.layout, p.draft) == ("h100-sxm", 1, r.layout, "none"))
    assert r.speedup == pytest.approx(r.capacity_rps / plain.capacity_rps)


def test_ranking_is_cost_then_gpus(local: tuple[object, FleetAnswer]) -> None:
    _, ans = local
    ok = [r for r in ans.rows if r.ok]
    assert ok and ans.rows[: len(ok)] == tuple(ok)  # served configurations first
    for r in ok:  # dollars recomputed by hand: the fleet's GPU-hours over the tokens it serves
        assert r.usd_per_mtok == pytest.approx(cost_per_mtok_usd(r.gpus, PRICES[r.hardware], 40 * 250))
        assert r.gpus == r.replicas * r.gpus_per_replica == math.ceil(40 / r.capacity_rps) * r.tp
        assert r.gpus_low <= r.gpus <= r.gpus_high
    usd = [r.usd_per_mtok for r in ok]
    assert usd == sorted(usd)  # type: ignore[type-var]
    plain = min(r.usd_per_mtok for r in ok if r.draft == "none")  # type: ignore[type-var]
    assert ans.best is not None and ans.best.usd_per_mtok <= plain  # type: ignore[operator]


def _draft(q: object, s: object, r: FleetRow) -> object:
    return make_draft("none", s.model) if r.draft == "none" else next(  # type: ignore[attr-defined]
        d for d in q.drafts if d.label == r.draft)  # type: ignore[attr-defined]


def test_winner_and_neighbours_agree_with_the_planners_solver(local: tuple[object, FleetAnswer]) -> None:
    q, ans = local
    s = q.scenario  # type: ignore[attr-defined]
    a = s.arrival
    for r in [*ans.rows[:3], next(x for x in ans.rows if x.draft == "none" and x.ok)]:
        t = target_for(q, Placement(r.hardware, r.tp, r.ep))  # type: ignore[arg-type]
        d = _draft(q, s, r)
        # a replica's capacity: the planner's bisection on its own Little's-law solver (plan.capacity), within 3%
        # (the step time steps with the engine's batch padding, so the two grids may land either side of a step)
        assert r.capacity_rps == pytest.approx(solver_max_rate(t, d, r.k, a, 15.0, r.capacity_rps), rel=0.03)
        # the fleet sized: each replica's share of the rate meets the SLO by the planner's solver
        assert latency_at_rate_ms(t, d, r.k, a, 40 / r.replicas) <= 15.0


def test_mix_tokens_are_the_planners_workload_mix() -> None:
    s = load_scenario(Path(__file__).resolve().parents[2] / "scenarios" / "chat-traffic-llama8b-h100.yaml")
    assert s.traffic is not None and len(s.traffic.workloads) == 2
    d = make_draft("eagle3", s.model)
    tps = mix_tokens(d, s.model, s.traffic.workloads, (1, 2, 3, 4), None)
    t = target_for(question(s, [d], (1,), None, None), Placement("h100-sxm", 1))
    mix, _ = acceptance_mix(d, t, s.traffic.workloads, 4)
    total = sum(c.share for c in mix.classes)
    for i, k in enumerate((1, 2, 3, 4)):
        want = sum(c.share / total * (1 + np.cumprod(c.conditional(k)).sum()) for c in mix.classes)
        assert tps["central"][i] == pytest.approx(want, rel=1e-12)
        assert tps["low"][i] < tps["central"][i] < tps["high"][i]


def test_cli_answer_first_in_80_columns(capsys: pytest.CaptureFixture[str], scenario_file: Path,
                                        local: tuple[object, FleetAnswer]) -> None:
    args = ("fleet", str(scenario_file), "-H", "h100-sxm,L40S", "--tp", "1,2", "-k", "1-3",
            "--gpu-hour-usd", "h100-sxm=2.5,l40s=1")
    code, out, err = run(capsys, *args)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("Cheapest fleet for 40 requests/s within 15 ms/token (mean):")
    assert max(map(len, lines)) <= 80
    code, out, _ = run(capsys, *args, "-f", "json", "--top", "0")
    data = json.loads(out)
    best = local[1].best
    assert code == 0 and best is not None and data["configurations"] == 28 and len(data["rows"]) == 28
    assert (data["best"]["hardware"], data["best"]["tp"], data["best"]["draft"], data["best"]["k"]) == (
        best.hardware, best.tp, best.draft, best.k)


def test_cli_searches_pools_with_pd(capsys: pytest.CaptureFixture[str], scenario_file: Path,
                                    pools: FleetAnswer) -> None:
    args = ("fleet", str(scenario_file), "-H", "h100-sxm,L40S", "--tp", "1,2", "-k", "1-3",
            "--gpu-hour-usd", "h100-sxm=2.5,l40s=1", "--pd", "1:2,2P1D,2:4")  # 2:4 is 1:2
    code, out, err = run(capsys, *args, "--top", "0")
    assert code == 0, err
    lines = out.splitlines()
    assert max(map(len, lines)) <= 80 and any("1P2D" in line for line in lines)
    assert any(line.split()[:6] == ["#", "GPUs", "band", "hardware", "tp", "layout"] for line in lines)
    code, out, _ = run(capsys, *args, "-f", "json", "--top", "0", "--kv-link", "43.5")
    data = json.loads(out)
    assert code == 0 and data["configurations"] == 84 and {r["layout"] for r in data["rows"]} == {
        "aggregated", "1P2D", "2P1D"}
    best = pools.best
    assert best is not None and (data["best"]["layout"], data["best"]["gpus"]) == (best.layout, best.gpus)


@pytest.mark.parametrize(("args", "says"), [
    (("--backend", "dsk"), "unknown backend 'dsk' (did you mean dask?)"),
    (("-H", "h100"), "unknown hardware 'h100' (did you mean"),
    (("--scheduler", "tcp://x:8786"), "--scheduler is a Dask scheduler's address"),
    (("-H", "h100-sxm,l40s", "--gpu-hour-usd", "h100-sxm=2"), "no price for l40s"),
    (("--ep", "2"), "no layout searched fits llama-3.1-8b"),
    (("-d", "eagle4"), "--draft: unknown draft 'eagle4'"),
    (("-k", "65"), "--k must be in [0, 64]"),
    (("--top", "-1"), "--top must be >= 0"),
    (("--pd", "1-2"), "'1-2' is not prefill:decode replicas"),
    (("--pd", "1:0"), "replicas per pool must be in [1, 64]"),
    (("--pd", "1:1,"), "'' is not prefill:decode replicas"),
    (("--pd", "1:1", "--kv-link", "0"), "--kv-link must be > 0 GB/s"),
    (("--kv-link", "40"), "--kv-link is the KV link between prefill and decode pools: give it with --pd"),
])
def test_bad_input_is_one_line_exit_2(capsys: pytest.CaptureFixture[str], scenario_file: Path,
                                      args: tuple[str, ...], says: str) -> None:
    code, out, err = run(capsys, "fleet", str(scenario_file), *args)
    assert code == 2 and out == "" and says in err and len(err.strip().splitlines()) == 1


def test_a_scenario_without_an_slo_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "no-slo.yaml"
    path.write_text(SCENARIO.replace("objective: slo\nslo_ms_per_token: 15\n", "objective: throughput\n"))
    code, _, err = run(capsys, "fleet", str(path))
    assert code == 2 and "fleet needs a per-token latency SLO" in err


def test_dask_missing_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch,
                                             local: tuple[object, FleetAnswer]) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # not installed: dask is no runtime dependency
    q, _ = local
    with pytest.raises(SpecsimError, match=r"--backend dask needs Dask's distributed scheduler: pip install"):
        search(q, SPACE, "dask", task_configs=TASK)  # type: ignore[arg-type]

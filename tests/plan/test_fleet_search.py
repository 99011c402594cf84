"""Issue 33: the fleet search (plan/fleet_search.py, `specsim fleet`). The answer on a Dask local cluster is the
local one exactly; the winner and its neighbours agree with the planner's own Little's-law solver; the mix's
tokens per step are the planner's workload mix; bad input is one line, exit 2, the nearest name."""

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
from specsim.plan.capacity import latency_at_rate_ms, solver_max_rate
from specsim.plan.fleet_price import FleetRow, Placement, target_for
from specsim.plan.fleet_search import FleetAnswer, Space, mix_tokens, question, search, tasks_of
from specsim.scenario.scenario import load_scenario
from specsim.scenario.serving import cost_per_mtok_usd
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


def test_the_search_prices_every_configuration_once(local: tuple[object, FleetAnswer]) -> None:
    _, ans = local
    assert ans.configurations == 4 * 7 == len(ans.rows) and ans.tasks == 2
    keys = {(r.hardware, r.tp, r.ep, r.draft, r.k) for r in ans.rows}
    assert len(keys) == ans.configurations
    # 10,000 configurations (100 placements of 100) are 20 tasks of 500, a placement never split
    tasks = tasks_of(list(range(100)), 100)
    assert len(tasks) == 20 and [p for t in tasks for p in t] == list(range(100))
    assert tasks_of(list(range(3)), 1000) == [[0], [1], [2]]


def test_cluster_answer_equals_the_local_one(local: tuple[object, FleetAnswer]) -> None:
    distributed = pytest.importorskip("distributed")
    q, ans = local
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        remote = search(q, SPACE, "dask", c.scheduler_address, task_configs=TASK)  # type: ignore[arg-type]
    assert remote.backend == "dask" and remote.tasks == 2
    assert remote.best == ans.best and remote.rows == ans.rows  # bit for bit: same best, same table


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
    assert lines[0].startswith("Cheapest fleet for 40 requests/s within 15 ms/token:")
    assert max(map(len, lines)) <= 80
    code, out, _ = run(capsys, *args, "-f", "json", "--top", "0")
    data = json.loads(out)
    best = local[1].best
    assert code == 0 and best is not None and data["configurations"] == 28 and len(data["rows"]) == 28
    assert (data["best"]["hardware"], data["best"]["tp"], data["best"]["draft"], data["best"]["k"]) == (
        best.hardware, best.tp, best.draft, best.k)


@pytest.mark.parametrize(("args", "says"), [
    (("--backend", "dsk"), "unknown backend 'dsk' (did you mean dask?)"),
    (("-H", "h100"), "unknown hardware 'h100' (did you mean"),
    (("--scheduler", "tcp://x:8786"), "--scheduler is a Dask scheduler's address"),
    (("-H", "h100-sxm,l40s", "--gpu-hour-usd", "h100-sxm=2"), "no price for l40s"),
    (("--ep", "2"), "no layout searched fits llama-3.1-8b"),
    (("-d", "eagle4"), "--draft: unknown draft 'eagle4'"),
    (("-k", "65"), "--k must be in [0, 64]"),
    (("--top", "-1"), "--top must be >= 0"),
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

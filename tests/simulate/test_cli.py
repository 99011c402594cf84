"""`specsim simulate` end to end: the bundled traffic scenario in every format, side by side on and off, sweeps,
the time series file, determinism, and bad input (one line, exit 2, nothing written)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specsim.advise.simulation import make_setup
from specsim.advise.traffic import stationary
from specsim.scenario.scenario import load_scenario
from specsim.scenario.traffic import Gamma, generate_requests
from specsim.simulate.engine import simulate
from specsim.simulate.metrics import summarize
from specsim.step.policy import Policy
from tests.corpus.harness import ROOT, assert_clean_failure, invoke, snapshot

BUNDLED = ROOT / "scenarios" / "chat-traffic-llama8b-h100.yaml"
FAST = ["--requests", "300", "--policy", "k=3", "--draft", "eagle3"]  # no analytic plan to run first


def test_bundled_scenario_json_side_by_side() -> None:
    r = invoke("simulate", str(BUNDLED), *FAST, "--format", "json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    off, on = data["runs"]["off"], data["runs"]["on"]
    assert off["policy"] == "off" and on["policy"] == "k=3" and data["draft"] == "eagle3"
    assert off["completed"] == on["completed"] == data["traffic"]["requests"] == 300
    # one seeded traffic: both runs emit exactly the same output tokens
    s = load_scenario(BUNDLED)
    setup = make_setup(s, requests=300, policy=Policy.static(3), draft="eagle3")
    req = generate_requests(setup.traffic, setup.seed)
    assert off["output_tok_s"] * off["window_s"] == pytest.approx(req.output_tokens.sum(), rel=1e-9)
    assert on["output_tok_s"] * on["window_s"] == pytest.approx(req.output_tokens.sum(), rel=1e-9)
    # tokens per decode step: 1 off; on, the mix's expectation 1 + sum_i P(A >= i) (share-weighted), less a
    # little for requests whose last step is cut by their output length
    assert off["tokens_per_decode_step"] == 1.0
    expected = sum(a["share"] * a["tokens_per_step"] for a in data["acceptance"])
    assert expected * 0.93 < on["tokens_per_decode_step"] < expected * 1.01
    assert on["tpot_s"]["p50"] < off["tpot_s"]["p50"]
    assert data["comparison"]["tpot_p50_speedup"] == pytest.approx(off["tpot_s"]["p50"] / on["tpot_s"]["p50"])
    # the draft's KV leaves fewer tokens; goodput and price are reported under the scenario's SLO and price
    kv = data["serving"]["kv_capacity_tokens"]
    assert kv["k=3"] < kv["off"] and data["serving"]["kv_source"] == "memory model"
    assert on["goodput_rps"] is not None and on["cost_per_mtok_usd"] > 0
    assert len(on["timeseries"]["decode_batch"]) == 200
    # the off run, re-simulated here, gives the same percentiles
    res = simulate(req, setup.engine(Policy.off()), setup.cost(), None, setup.seed)
    m = summarize(res, setup.slo, setup.pricing, bins=None)
    assert off["ttft_s"]["p99"] == pytest.approx(m.ttft_s.p99, rel=1e-12)
    assert off["tpot_s"]["p50"] == pytest.approx(m.tpot_s.p50, rel=1e-12)


@pytest.mark.parametrize("fmt", ["table", "csv", "markdown"])
def test_other_formats(fmt: str) -> None:
    r = invoke("simulate", str(BUNDLED), *FAST, "--format", fmt)
    assert r.code == 0, r.err
    if fmt == "csv":
        rows = list(r.out.splitlines())
        assert rows[0].startswith("policy,draft,requests") and len(rows) == 3
    elif fmt == "markdown":
        assert "| TPOT median (ms) |" in r.out and "---:|" in r.out
    else:
        assert "TPOT p99 (ms)" in r.out and "on / off" in r.out


def test_deterministic_and_seeded() -> None:
    a = invoke("simulate", str(BUNDLED), *FAST, "--no-compare", "-f", "json")
    b = invoke("simulate", str(BUNDLED), *FAST, "--no-compare", "-f", "json")
    c = invoke("simulate", str(BUNDLED), *FAST, "--no-compare", "--seed", "7", "-f", "json")
    assert a.code == b.code == c.code == 0
    assert a.out == b.out and a.out != c.out
    assert list(json.loads(a.out)["runs"]) == ["on"]


def test_timeseries_and_replicas(tmp_path: Path) -> None:
    out = tmp_path / "ts.csv"
    r = invoke("simulate", str(BUNDLED), *FAST, "--target-rate", "30", "--timeseries", str(out), "-f", "json")
    assert r.code == 0, r.err
    ts = pd.read_csv(out)
    assert set(ts["policy"]) == {"off", "k=3"} and len(ts) == 400
    data = json.loads(r.out)
    # the binned batch integrates to the run's mean decode batch (equal bins)
    on = ts[ts["policy"] == "k=3"]
    assert on["decode_batch"].mean() == pytest.approx(data["runs"]["on"]["mean_decode_batch"], rel=1e-6)
    rep = data["replicas"]
    assert rep["target_rate_rps"] == 30 and rep["on"]["meets_slo"] and rep["off"]["meets_slo"]
    assert rep["on"]["replicas"] <= rep["off"]["replicas"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ts.csv"]


def test_sweep_rates_policies_drafts_in_parallel() -> None:
    args = ["simulate", str(BUNDLED), "--requests", "200", "--sweep-rates", "4,8", "--sweep-policies", "off;k=2",
            "--sweep-drafts", "all", "-f", "csv"]
    one = invoke(*args, "--jobs", "1")
    two = invoke(*args, "--jobs", "2")
    assert one.code == two.code == 0, one.err + two.err
    assert one.out == two.out  # seeded per case: the same rows whatever the parallelism
    from io import StringIO

    frame = pd.read_csv(StringIO(one.out))
    # plain decoding once per rate; each draft's k = 2 per rate
    assert len(frame) == 2 * (1 + 2)
    assert sorted(set(frame["draft"])) == ["draft:llama-3.2-1b", "eagle3", "none"]
    assert (frame.groupby("rate_rps").size() == 3).all()
    # a row re-simulated directly
    s = load_scenario(BUNDLED)
    setup = make_setup(s, requests=200, policy=Policy.static(2), draft="eagle3")
    assert sorted(frame["rate_rps"].round(9).unique()) == [4.0, 8.0]
    row = frame[(frame["draft"] == "eagle3") & np.isclose(frame["rate_rps"], 8.0)].iloc[0]
    # a rate curve swept at a rate runs steady at it (its gap CV kept), not the curve from its start hour
    steady = stationary(setup.traffic, 8.0)
    assert isinstance(steady.arrivals, Gamma) and steady.arrivals.rate_rps == 8.0
    res = simulate(generate_requests(steady, setup.seed), setup.engine(), setup.cost(), setup.mix()[0], setup.seed)
    assert res.requests.mean_rate_rps == pytest.approx(8.0, rel=0.15)  # what was simulated is the rate labelled
    assert row["tpot_p99_s"] == pytest.approx(summarize(res, bins=None).tpot_s.p99, rel=1e-9)
    assert np.isfinite(frame["goodput_rps"]).all()


def _scenario(tmp_path: Path, traffic: str) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text("hardware: h100-sxm\nmodel: llama-3.1-8b\ndrafts: [eagle3]\n" + traffic)
    return p


@pytest.mark.parametrize(("traffic", "trace", "expect"), [
    ("traffic:\n  arrivals: {process: trace, path: t.csv}\n",
     "time_s,prompt_tokens,output_tokens\n0,100,20\n1.5,abc,6\n",
     ("t.csv line 3", "field 'prompt_tokens'", "'abc'")),
    ("traffic:\n  arrivals: {process: trace, path: t.csv}\n",
     "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,10,5\nnot a time,10,5\n",
     ("t.csv line 3", "field 'TIMESTAMP'", "date-time")),
    ("traffic:\n  arrivals: {process: poisson, rate_rps: 2}\n  num_requests: 10\n"
     "  prompt: {dist: lognormal, median: 100, sigma: -1}\n  output: 20\n", None,
     ("s.yaml line 7", "traffic.prompt", "field 'sigma'")),
    ("traffic:\n  arrivals: {process: poisson, rate_rps: 2}\n  num_requests: 10\n  prompt: 100\n"
     "  output: {dist: weibull}\n", None, ("s.yaml line 8", "traffic.output", "field 'dist'")),
])
def test_malformed_trace_or_distribution_exit_2(tmp_path: Path, traffic: str, trace: str | None,
                                                 expect: tuple[str, ...]) -> None:
    if trace is not None:
        (tmp_path / "t.csv").write_text(trace)
    scen = _scenario(tmp_path, traffic)
    before = snapshot(tmp_path)
    r = invoke("simulate", str(scen), "--timeseries", str(tmp_path / "ts.csv"))
    assert_clean_failure(r, expect, before, snapshot(tmp_path), f"simulate {traffic!r}")


@pytest.mark.parametrize(("args", "expect"), [
    (["--policy", "k=lots"], ("--policy", "cannot read 'k=lots'")),
    (["--requests", "10", "--duration", "5"], ("--requests or --duration",)),
    (["--draft", "medusa"], ("--draft", "'medusa' is not one of the scenario's drafts")),
    (["--target-rate", "10", "--policy", "off"], ("--target-rate needs an SLO",)),
    (["--backend", "spark"], ("--backend must be one of loky | dask | ray",)),
    (["--sweep-rates", "2,x"], ("--sweep-rates",)),
    (["--sweep-rates", "2", "--timeseries", "ts.csv"], ("--timeseries", "sweep")),
])
def test_bad_options_exit_2_and_write_nothing(tmp_path: Path, args: list[str], expect: tuple[str, ...]) -> None:
    scen = _scenario(tmp_path, "traffic:\n  arrivals: {process: poisson, rate_rps: 2}\n  num_requests: 20\n"
                               "  prompt: 100\n  output: 20\n")
    before = snapshot(tmp_path)
    extra = [] if any(a.startswith(("--sweep", "--timeseries")) for a in args) else [
        "--timeseries", str(tmp_path / "out.csv")]  # a file that must not appear
    r = invoke("simulate", str(scen), *args, *extra, cwd=tmp_path)
    assert_clean_failure(r, expect, before, snapshot(tmp_path), f"simulate {args}")


def test_scenario_without_traffic_is_simulated_from_its_arrival_rate_or_refused() -> None:
    r = invoke("simulate", str(ROOT / "scenarios" / "reasoning-h200.yaml"), "--requests", "30", "--policy", "k=3",
               "-f", "json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["traffic"]["arrivals"] == "Poisson at 0.5 requests/s" and data["traffic"]["mean_output_tokens"] == 8000
    r = invoke("simulate", str(ROOT / "scenarios" / "llama8b-1b-draft-h100.yaml"))
    assert r.code == 2 and "no 'traffic:' section" in r.err and r.err.count("\n") == 1

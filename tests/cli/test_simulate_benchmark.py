"""`specsim simulate` without a scenario, as a serving benchmark asks its question: one row per (configuration,
concurrency) in the clients' names, the frontier's crossovers and recommendation, the plot, the concurrency-1
TPOT against the planner's step time per token, and bad input (one line, exit 2, nothing written)."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pandas as pd
import pytest

from specsim.simulate.client import CLIENT_COLUMNS
from tests.corpus.harness import assert_clean_failure, invoke, snapshot

BASE = ("simulate", "-H", "h100-sxm", "-m", "llama-3.1-8b", "--draft", "eagle3", "-k", "3", "--input-len", "512",
        "--output-len", "256")


def test_csv_rows_carry_the_clients_columns() -> None:
    r = invoke(*BASE, "--concurrency", "1,8,64", "--num-prompts", "40", "-f", "csv", "--jobs", "1")
    assert r.code == 0, r.err
    frame = pd.read_csv(StringIO(r.out))
    assert list(frame.columns[:2 + len(CLIENT_COLUMNS)]) == ["configuration", "concurrency", *CLIENT_COLUMNS]
    assert sorted(set(frame["configuration"])) == ["eagle3 k=3", "off"]
    assert sorted(frame["concurrency"].unique()) == [1, 8, 64]
    off = frame[frame["configuration"] == "off"].set_index("concurrency")
    on = frame[frame["configuration"] != "off"].set_index("concurrency")
    assert (off["acceptance_length"] == 1.0).all() and (on["acceptance_length"] > 1.5).all()
    # the clients' own identities: per GPU at tp 1 is the total; interactivity is 1000 / median TPOT
    assert (frame["output_tok_s_per_gpu"] == frame["output_tok_s"]).all()
    assert (frame["per_user_tok_s"] - 1000 / frame["tpot_median_ms"]).abs().max() < 1e-9
    # more clients: more throughput, less per user
    assert off["output_tok_s"].is_monotonic_increasing and off["per_user_tok_s"].is_monotonic_decreasing
    assert (frame["itl_definition"] == "chunk").all()  # vLLM's client: per streamed chunk


def test_json_has_crossovers_recommendation_and_engine_configs(tmp_path: Path) -> None:
    png = tmp_path / "frontier.png"
    r = invoke(*BASE, "--concurrency", "1,16", "--num-prompts", "30", "-f", "json", "--plot", str(png), "--jobs", "1")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["load"] == "concurrency" and set(data["crossovers"]) == {"eagle3 k=3"}
    first = data["recommendation"][0]
    assert first["from"] == 1 and first["configuration"] == "eagle3 k=3" and first["gain"] > 1.2
    assert data["engine_configs"]["vllm"] is not None  # the recommendation as vLLM's configuration
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_concurrency_one_tpot_is_the_planners_time_per_token() -> None:
    """Issue 21's floor: at concurrency 1 the simulated TPOT equals `evaluate`'s ms per token (the same step
    priced by the planner, at the decode steps' mean context) within 1%, off and on."""
    sim = invoke("simulate", "-H", "h100-sxm", "-m", "llama-3.1-8b", "--draft", "eagle3", "-k", "3",
                 "--acceptance-length", "2.8", "--concurrency", "1", "--num-prompts", "30", "--input-len", "1024",
                 "--output-len", "1024", "-f", "json", "--jobs", "1")
    ev = invoke("evaluate", "-H", "h100-sxm", "-m", "llama-3.1-8b", "--draft", "eagle3", "--k", "3", "--batch", "1",
                "--context", "1535", "--acceptance-length", "2.8", "-f", "json")
    assert sim.code == ev.code == 0, sim.err + ev.err
    rows = {r["configuration"]: r for r in json.loads(sim.out)["rows"]}
    planner = json.loads(ev.out)
    assert rows["eagle3 k=3"]["tpot_mean_ms"] == pytest.approx(planner["ms_per_token"], rel=0.01)
    assert rows["off"]["tpot_mean_ms"] == pytest.approx(planner["baseline_step_ms"], rel=0.01)


@pytest.mark.parametrize(("args", "expect"), [
    (("simulate", "-H", "h100-sxm", "-m", "llama-3.1-8b"), ("--draft",)),
    ((*BASE, "--concurrency", "0"), ("--concurrency",)),
    ((*BASE, "--concurrency", "1,x"), ("--concurrency",)),
    ((*BASE, "--range-ratio", "1.5", "--client", "vllm"), ("--range-ratio",)),
    ((*BASE, "--client", "trtllm-bench"), ("--client",)),
    ((*BASE, "--acceptance-length", "5.5"), ("--acceptance-length",)),
    ((*BASE, "--concurrency", "4", "--sweep-rates", "1,2"), ("--concurrency",)),
    ((*BASE, "--plot", "out.svg", "--concurrency", "4"), ("--plot", ".png")),
    (("simulate", "-H", "no-such-gpu", "-m", "llama-3.1-8b", "--draft", "eagle3"), ("no-such-gpu",)),
    (("simulate", "scenarios/chat-traffic-llama8b-h100.yaml", "-m", "no-such-model"), ("no-such-model",)),
    ((*BASE, "--duration", "5"), ("--duration", "scenario")),
    ((*BASE, "--rate", "4", "--concurrency", "8"), ("--rate",)),
])
def test_bad_input_is_one_line(args: tuple[str, ...], expect: tuple[str, ...], tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    args = tuple(str(root / a) if a.startswith("scenarios/") else a for a in args)
    before = snapshot(tmp_path)
    r = invoke(*args, cwd=tmp_path)
    assert_clean_failure(r, expect, before, snapshot(tmp_path), " ".join(args))


def test_one_rate_without_a_scenario_is_an_open_loop_point() -> None:
    r = invoke(*BASE, "--rate", "4", "--num-prompts", "60", "-f", "csv", "--jobs", "1")
    assert r.code == 0, r.err
    frame = pd.read_csv(StringIO(r.out))
    assert list(frame.columns[:2]) == ["configuration", "rate_rps"] and set(frame["rate_rps"]) == {4.0}
    assert (frame["request_per_s"] < 4.0 * 1.5).all()  # Poisson at 4 requests/s, not a closed loop's pace

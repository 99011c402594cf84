"""`specsim simulate` answers exactly what it was asked (issue 30): --requests is honoured at a rate without a
scenario (the same rows, to the last digit, as the scenario that says the same load), every output echoes the
requests simulated and completed, one vocabulary of columns across its modes (a comparison and a sweep of the same
run give the same figures under the same names), a flag that does nothing in the run asked for is refused in one
line, a frontier whose load points complete nothing says so in one line, and `--help` reads whole at 80 columns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pandas as pd
import pytest

from specsim.simulate.client import CLIENT_COLUMNS, LABELS, MORE_COLUMNS
from tests.corpus.harness import ROOT, assert_clean_failure, invoke, snapshot

FREE = ("simulate", "-H", "h100-sxm", "-m", "llama-3.1-8b", "--draft", "eagle3", "-k", "3")
CHAT = str(ROOT / "scenarios" / "chat-traffic-llama8b-h100.yaml")
REASONING = str(ROOT / "scenarios" / "reasoning-h200.yaml")  # no target rate
#: the same load as `FREE --rate 8 --requests 1000`: Poisson arrivals, fixed lengths, vLLM's limits, k = 3
SAME_LOAD = """name: rate8
hardware: h100-sxm
model: llama-3.1-8b
drafts: [eagle3]
max_k: 8
traffic:
  arrivals: {process: poisson, rate_rps: 8}
  num_requests: 1000
  prompt: 1024
  output: 1024
  seed: 0
serving:
  max_num_seqs: 256
  max_num_batched_tokens: 8192
  speculation: {k: 3}
"""


def _csv(r: object) -> pd.DataFrame:
    assert r.code == 0, r.err  # type: ignore[attr-defined]
    return pd.read_csv(StringIO(r.out))  # type: ignore[attr-defined]


def test_requests_at_a_rate_are_honoured_and_match_the_scenario_of_the_same_load(tmp_path: Path) -> None:
    """The issue's case: 1,000 requests at 8 requests/s, not 20. Through the flags and through a scenario saying the
    same load, the same seeded requests give the same rows to the last digit."""
    flags = _csv(invoke(*FREE, "--rate", "8", "--requests", "1000", "-f", "csv", "-j", "1"))
    assert (flags["requests"] == 1000).all() and (flags["completed"] == 1000).all()
    path = tmp_path / "rate8.yaml"
    path.write_text(SAME_LOAD)
    scen = _csv(invoke("simulate", str(path), "-f", "csv")).set_index("policy")
    for config, policy in (("off", "off"), ("eagle3 k=3", "k=3")):
        row = flags[flags["configuration"] == config].iloc[0]
        for col in (*CLIENT_COLUMNS, *MORE_COLUMNS, "requests", "completed", "window_s"):
            assert row[col] == scen.loc[policy, col], (config, col)
    # 1,000 requests over ~125 s at 8/s: the window covers the arrivals (20 requests would span ~2.5 s)
    assert flags["window_s"].min() > 1000 / 8 * 0.9
    # without --requests a rate sends vllm bench serve's default 1,000 prompts; a concurrency 10 per client
    default = _csv(invoke(*FREE, "--rate", "8", "--input-len", "64", "--output-len", "16", "-f", "csv", "-j", "1"))
    assert (default["requests"] == 1000).all()


def test_every_output_echoes_requests_simulated_and_completed(tmp_path: Path) -> None:
    args = (*FREE, "--concurrency", "2,4", "--input-len", "128", "--output-len", "32", "-j", "1")
    table = invoke(*args)
    assert table.code == 0, table.err
    assert "requests simulated per load point: 20-40; all completed" in table.out  # 10 x clients, at least 20
    rows = json.loads(invoke(*args, "-f", "json").out)["rows"]
    assert {(r["concurrency"], r["requests"], r["completed"]) for r in rows} == {(2, 20, 20), (4, 40, 40)}
    one = invoke("simulate", CHAT, "--requests", "60", "--policy", "k=3", "--draft", "eagle3")
    assert one.code == 0, one.err
    assert "│ requests simulated " in one.out and "│ requests completed " in one.out
    sweep = invoke("simulate", CHAT, "--requests", "60", "--sweep-rates", "4", "--policy", "k=3", "--draft", "eagle3",
                   "-j", "1")
    assert "requests simulated per load point: 60; all completed" in sweep.out


def test_one_vocabulary_across_a_comparison_and_a_sweep() -> None:
    """The scenario's own traffic as one comparison and as a sweep over policies: the same runs, so the same
    figures under the same names (the clients'), and the tables name them the same way."""
    one = _csv(invoke("simulate", CHAT, "--requests", "80", "--policy", "k=3", "--draft", "eagle3", "-f", "csv"))
    sweep = _csv(invoke("simulate", CHAT, "--requests", "80", "--sweep-policies", "off;k=3", "--draft", "eagle3",
                        "-j", "1", "-f", "csv"))
    assert list(sweep.columns[:2 + len(CLIENT_COLUMNS)]) == ["configuration", "rate_rps", *CLIENT_COLUMNS]
    for col in (*CLIENT_COLUMNS, *MORE_COLUMNS, "ttft_p50_s", "tpot_p99_s"):  # the clients' names and the raw ones
        assert one[col].tolist() == sweep[col].tolist(), col
    assert (one["ttft_median_ms"] == one["ttft_p50_s"] * 1e3).all()
    tables = [invoke("simulate", CHAT, "--requests", "80", "--policy", "k=3", "--draft", "eagle3").out,
              invoke("simulate", CHAT, "--requests", "80", "--sweep-rates", "6", "--policy", "k=3", "--draft",
                     "eagle3", "-j", "1").out,
              invoke(*FREE, "--concurrency", "1", "--input-len", "128", "--output-len", "32", "-j", "1").out]
    for out in tables:
        assert "p50" not in out and "_s " not in out  # the clients' "median", never the raw names
    assert "TPOT median (ms)" in tables[0] and "median ms" in tables[1]
    assert all(label[0].count("\n") <= 1 for label in LABELS.values())


@pytest.mark.parametrize(("args", "expect"), [
    ((CHAT, "--requests", "50", "--jobs", "2"), ("--jobs", "not read by one comparison")),
    ((CHAT, "--sweep-rates", "4", "--target-rate", "3"), ("--target-rate", "a sweep")),
    ((CHAT, "--concurrency", "4", "--rate", "3"), ("--rate", "--concurrency", "not both")),
    ((CHAT, "--concurrency", "4", "--duration", "5"), ("--duration", "--concurrency", "not both")),
    ((CHAT, "--sweep-rates", "2,4", "--rate", "3"), ("--rate", "--sweep-rates", "not both")),
    ((CHAT, "--sweep-policies", "off;k=2", "--policy", "k=3"), ("--policy", "--sweep-policies", "not both")),
    ((CHAT, "--sweep-drafts", "all", "--draft", "eagle3"), ("--draft", "--sweep-drafts", "not both")),
    ((CHAT, "--concurrency", "4", "--no-compare"), ("--no-compare", "plain decoding")),
    ((CHAT, "--concurrency", "4", "--timeseries", "ts.csv"), ("--timeseries", "a frontier")),
    ((REASONING, "--requests", "20", "--policy", "k=3", "--max-replicas", "4"), ("--max-replicas", "target rate")),
    ((CHAT, "--tp", "3"), ("tp 3",)),  # a field's flag sets the scenario's field: checked as the file's would be
    ((*FREE[1:], "--sweep-drafts", "eagle3"), ("--sweep-drafts", "--draft")),
    (("-H", "h100-sxm", "-m", "llama-3.1-8b", "--sweep-drafts", "eagle3"), ("--sweep-drafts", "without a scenario")),
    ((*FREE[1:], "--max-replicas", "4"), ("--max-replicas",)),
    ((*FREE[1:], "--no-compare"), ("--no-compare",)),
    ((*FREE[1:], "--policy", "k=2"), ("-k", "--policy", "not both")),
    ((*FREE[1:], "--requests", "5", "--num-prompts", "5"), ("--requests", "--num-prompts")),
    ((*FREE[1:], "--concurrency", "2", "--sweep-concurrency", "4"), ("--concurrency", "--sweep-concurrency")),
])
def test_a_flag_that_does_nothing_is_refused_in_one_line(args: tuple[str, ...], expect: tuple[str, ...],
                                                         tmp_path: Path) -> None:
    before = snapshot(tmp_path)
    r = invoke("simulate", *args, cwd=tmp_path)
    assert_clean_failure(r, expect, before, snapshot(tmp_path), " ".join(args))


def test_no_compare_in_a_sweep_runs_the_policy_alone() -> None:
    both = _csv(invoke("simulate", CHAT, "--requests", "60", "--sweep-rates", "4", "--policy", "k=3", "--draft",
                       "eagle3", "-j", "1", "-f", "csv"))
    alone = _csv(invoke("simulate", CHAT, "--requests", "60", "--sweep-rates", "4", "--policy", "k=3", "--draft",
                        "eagle3", "--no-compare", "-j", "1", "-f", "csv"))
    assert both["policy"].tolist() == ["off", "k=3"] and alone["policy"].tolist() == ["k=3"]
    assert alone.iloc[0].equals(both.iloc[1].rename(alone.index[0]))


def test_a_frontier_that_completes_nothing_says_so_in_one_line(tmp_path: Path) -> None:
    """Issue 30: 100,000 prompt tokens are within Llama-3.1-70B's window but not its KV cache with fp8 weights on
    one H100: every request is rejected; the frontier refuses in one line, not 'Encountered all NA values'."""
    before = snapshot(tmp_path)
    r = invoke("simulate", "-H", "h100-sxm", "-m", "llama-3.1-70b", "--dtype", "fp8", "--draft", "eagle3", "-k", "3",
               "--input-len", "100000", "--concurrency", "1", cwd=tmp_path)
    assert_clean_failure(r, ("no load point completed a request", "KV cache"), before, snapshot(tmp_path),
                         "input 100k")


def test_help_reads_whole_at_80_columns() -> None:
    env = {**os.environ, "COLUMNS": "80", "TERM": "dumb"}
    out = subprocess.run([sys.executable, "-m", "specsim.cli", "simulate", "--help"], capture_output=True, text=True,
                         env=env, check=True).stdout
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in out
    for flag in ("--requests", "--concurrency", "--sweep-policies", "--range-ratio", "--target-rate", "--client"):
        assert flag in out, flag
    text = " ".join(out.replace("│", " ").split())
    assert "(sglang, atom: r L to L; vllm: (1 - r) L to (1 + r) L)" in text  # nothing read as rich markup

"""`specsim simulate` as a user reads it at an 80-column terminal: every bundled scenario (simulated, or refused
in one line when it has no traffic), sweeps with long draft and policy names, what a swept rate means for a
rate curve, and no progress text on a stderr that is not a terminal."""

from __future__ import annotations

import contextlib
import io
import json
import re
from io import StringIO
from pathlib import Path

import pandas as pd
import pytest
import yaml

from specsim.advise.simulation import make_setup
from specsim.advise.traffic import stationary
from specsim.cli._format import fmt_value
from specsim.scenario.scenario import load_scenario
from specsim.scenario.traffic import Gamma, generate_requests
from specsim.step.policy import Policy
from tests._cli import run
from tests.corpus.harness import ROOT, invoke

SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
CHAT = ROOT / "scenarios" / "chat-traffic-llama8b-h100.yaml"
LONG_POLICY = "1-45:k=5,46-53:k=4,54-256:k=3"


@pytest.fixture(autouse=True)
def _eighty_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")


def _assert_fits(out: str, what: str) -> None:
    assert out.strip(), f"{what}: no output"
    assert "…" not in out, f"{what}: a cut cell\n{out}"
    wide = [line for line in out.splitlines() if len(line) > 80]
    assert not wide, f"{what}: lines wider than 80 columns: {wide}"


def _grid(out: str, title: str) -> tuple[list[str], dict[str, list[str]]]:
    """The table printed under `title` as a bordered grid (not a fallback layout): its header cells (two-line
    headers joined) and its body rows by first cell."""
    lines = out.splitlines()
    i = next(n for n, line in enumerate(lines) if line.strip() == title)
    assert lines[i + 1].startswith("┏"), f"{title!r} is not printed as a grid:\n{out}"
    head: list[str] = []
    rows: dict[str, list[str]] = {}
    for line in lines[i + 2:]:
        if line.startswith("┃"):
            cells = [c.strip() for c in line.strip("┃").split("┃")]
            head = cells if not head else [f"{a} {b}".strip() for a, b in zip(head, cells, strict=True)]
        elif line.startswith("│"):
            cells = [c.strip() for c in line.strip("│").split("│")]
            rows[cells[0]] = cells
        elif line.startswith("└"):
            return head, rows
    raise AssertionError(f"{title!r}: table not closed")


def _number(cell: str) -> float:
    return float(cell.replace(",", ""))


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_bundled_scenario_fits_80_columns_or_is_refused_in_one_line(path: Path) -> None:
    s = load_scenario(path)
    r = invoke("simulate", str(path), "--requests", "200")
    if s.traffic is None and s.arrival is None:  # a load of batch-size buckets: nothing to simulate
        assert r.code == 2 and r.out == ""
        assert "no 'traffic:' section to simulate" in r.err and r.err.count("\n") == 1, r.err
        assert "…" not in r.err
        return
    assert r.code == 0, r.err
    _assert_fits(r.out, path.name)
    head, rows = _grid(r.out, "speculation off and on")
    assert head == ["quantity", "off", "on", "on / off"]
    # the policy's full name is on its own line above the table, not cut into a column header
    data = json.loads(invoke("simulate", str(path), "--requests", "200", "-f", "json").out)
    policy = data["policy"]
    assert re.search(rf"^on: {re.escape(data['draft'])}, policy {re.escape(policy)} \(from ", r.out, re.M), r.out
    # every number is printed whole: each cell equals the JSON's value as formatted
    runs = [data["runs"]["off"], data["runs"]["on"]]
    # the clients' names (TTFT median, ms) for the raw figures (ttft_s.p50, seconds)
    for name, key, sub, scale in [("TTFT p99 (ms)", "ttft_s", "p99", 1e3), ("TPOT median (ms)", "tpot_s", "p50", 1e3),
                                  ("output tok/s", "output_tok_s", None, 1), ("peak KV (tokens)", "peak_kv_tokens",
                                                                               None, 1),
                                  ("goodput (req/s in SLO)", "goodput_rps", None, 1)]:
        if runs[0][key] is None:
            assert name not in rows
            continue
        want = [fmt_value((m[key][sub] if sub else m[key]) * scale) if key != "peak_kv_tokens" else f"{m[key]:,}"
                for m in runs]
        assert rows[name][1:3] == want, (name, rows[name])
    if data["replicas"] is not None:  # the scenario's target rate: replicas side by side, off and on
        rep = data["replicas"]
        rhead, rrows = _grid(r.out, f"replicas for {rep['target_rate_rps']:g} requests/s")
        assert rhead == ["quantity", "off", "on"]
        assert rrows["replicas"][1:] == [str(rep["off"]["replicas"]), str(rep["on"]["replicas"])]
    kv = data["serving"]["kv_capacity_tokens"]
    assert f"off {kv['off']:,}, on {kv[policy]:,}" in r.out


def test_one_run_and_explicit_table_format_fit() -> None:
    r = invoke("simulate", str(CHAT), "--requests", "200", "--policy", LONG_POLICY, "--draft", "draft:llama-3.2-1b",
               "--no-compare", "--target-rate", "20", "-f", "table")
    assert r.code == 0, r.err
    _assert_fits(r.out, "--no-compare")
    assert _grid(r.out, "simulation")[0] == ["quantity", "on"]
    assert _grid(r.out, "replicas for 20 requests/s")[0] == ["quantity", "on"]
    assert f"on: draft:llama-3.2-1b, policy {LONG_POLICY} (from --policy)" in r.out
    assert "off:" not in r.out


def _curve() -> tuple[float, float, float]:
    """The bundled curve's start hour, its rate there and its daily mean, read from the YAML itself."""
    arrivals = yaml.safe_load(CHAT.read_text())["traffic"]["arrivals"]
    hourly = arrivals["hourly_rps"]
    hour = arrivals["start_hour"]
    return hour, hourly[int(hour)], sum(hourly) / 24


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_sweep_fits_80_columns_and_says_what_the_rate_means(fmt: str) -> None:
    args = ["simulate", str(CHAT), "--requests", "200", "--sweep-rates", "4,8,12", "--sweep-drafts", "all",
            "--sweep-policies", f"off;{LONG_POLICY}", "-j", "1"]
    r = invoke(*args, "-f", fmt)
    assert r.code == 0, r.err
    hour, at_start, _mean = _curve()
    # each rate runs steady with the curve's gaps (gamma, CV 2) at that mean, not the day's curve from its start
    note = " ".join(r.out.split())  # the note wraps at the terminal's width
    assert ("rate: each rate runs steady, with the gaps of the scenario's rate curve (gamma, CV 2) at that mean "
            f"rate; the curve over the day (from hour {hour:g}, where it is {at_start:.3g} requests/s)") in note, r.out
    s = load_scenario(CHAT)
    swept = make_setup(s, requests=200, draft="eagle3", policy=Policy.static(3)).traffic
    steady = stationary(swept, 4.0)
    assert isinstance(steady.arrivals, Gamma) and steady.arrivals.cv == 2.0
    # the "arrived" column: the mean arrival rate of the 200 requests each rate simulated, near the rate itself
    arrived = {rate: generate_requests(stationary(swept, rate), 0).mean_rate_rps for rate in (4.0, 8.0, 12.0)}
    assert all(v == pytest.approx(rate, rel=0.3) for rate, v in arrived.items())
    csv = pd.read_csv(StringIO(invoke(*args, "-f", "csv").out))
    if fmt == "markdown":
        assert "| rate (req/s) | draft | policy | arrived (req/s) | TTFT p99 (ms) |" in r.out
        assert f"| 4 | eagle3 | {LONG_POLICY} | {fmt_value(arrived[4.0])} |" in r.out
        return
    _assert_fits(r.out, "sweep")
    titles = ["off (no speculation)", f"eagle3, policy {LONG_POLICY}", f"draft:llama-3.2-1b, policy {LONG_POLICY}"]
    for title in titles:
        head, rows = _grid(r.out, title)
        assert head == ["rate req/s", "arrived req/s", "TTFT p99 ms", "TPOT median ms", "TPOT p99 ms",
                        "output tok/s", "goodput req/s", "$ per M tokens"]
        assert list(rows) == ["4", "8", "12"]
        draft = "none" if title.startswith("off") else title.split(",")[0]
        for rate, cells in rows.items():
            want = csv[(csv["rate_rps"] == float(rate)) & (csv["draft"] == draft)].iloc[0]
            # whole numbers to 4 significant figures: a cut one ("1,75" for 1,752) would be off by far more
            assert _number(cells[1]) == pytest.approx(arrived[float(rate)], rel=5e-4)
            for cell, col, raw, scale in zip(cells[2:], ["ttft_p99_ms", "tpot_median_ms", "tpot_p99_ms",
                                                         "output_tok_s", "goodput_rps", "cost_per_mtok_usd"],
                                             ["ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "output_tok_s", "goodput_rps",
                                              "cost_per_mtok_usd"], [1e3, 1e3, 1e3, 1, 1, 1], strict=True):
                assert _number(cell) == pytest.approx(want[col], rel=5e-4), (title, rate, col, cell)
                assert want[col] == pytest.approx(want[raw] * scale, rel=1e-12)  # the client's name, the raw figure


def test_sweep_of_poisson_traffic_names_its_rate() -> None:
    r = invoke("simulate", str(ROOT / "scenarios" / "reasoning-h200.yaml"), "--requests", "40", "--policy", "k=3",
               "--sweep-rates", "0.25,0.5", "-j", "1")
    assert r.code == 0, r.err
    _assert_fits(r.out, "poisson sweep")
    assert "rate: the mean arrival rate (Poisson arrivals)" in r.out
    assert "daily mean" not in r.out
    assert list(_grid(r.out, "off (no speculation)")[1]) == ["0.25", "0.5"]


def test_progress_is_silent_when_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # rich alone would take either variable for a terminal and draw its bar into the captured stderr
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    code, out, err = run(capsys, "simulate", str(CHAT), "--requests", "100", "--policy", "k=3", "--draft", "eagle3")
    assert code == 0
    assert err == ""
    assert "speculation off and on" in out  # the table on stdout (in colour: FORCE_COLOR asks for it there)
    code, out, err = run(capsys, "simulate", str(CHAT), "--requests", "100", "--sweep-rates", "4,8", "--policy",
                         "k=3", "--draft", "eagle3", "-j", "1", "-f", "csv")
    assert code == 0 and err == ""
    assert out.startswith("configuration,rate_rps,")


def test_progress_is_drawn_at_a_terminal() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    err, out = Terminal(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        from specsim.cli.main import main

        try:
            main(["simulate", str(CHAT), "--requests", "100", "--policy", "k=3", "--draft", "eagle3", "--no-compare"])
        except SystemExit as exc:
            assert not exc.code
    assert "simulate" in err.getvalue()  # the bar, drawn (and erased when done) on the terminal
    assert "simulation" in out.getvalue() and "\x1b[" not in out.getvalue()

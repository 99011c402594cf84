"""Nothing ignored (issue 30's floor): an unknown key, column or section, or an option that does nothing in that
command, added to a valid input of every command is refused: exit 2, one line on stderr naming it, and no file
left behind."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.corpus.harness import ROOT, assert_clean_failure, invoke, snapshot

SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
TRAFFIC = [p for p in SCENARIOS if "traffic:" in p.read_text()]
BUCKETS = ROOT / "scenarios" / "chat-llama70b-h100.yaml"  # a day in three load buckets
EVAL = ["evaluate", "-H", "h100-sxm", "-m", "llama-3.1-8b", "-d", "eagle3", "--k", "3"]
RATIO = ["evaluate", "-c", "0.1", "--alpha", "0.7", "--k", "3"]
SIM = ["simulate", "-H", "h100-sxm", "-m", "llama-3.1-8b", "-d", "eagle3", "-k", "3", "--concurrency", "1",
       "--input-len", "64", "--output-len", "16", "--requests", "4"]

#: (command line, what the one line must name); each an option that would change nothing where it is given
INAPPLICABLE: list[tuple[list[str], str]] = [
    ([*EVAL, "--bogus", "1"], "--bogus"),
    ([*RATIO, "--tp", "2"], "--tp"),
    ([*RATIO, "--engine", "sglang"], "--engine"),
    ([*EVAL, "--ridge-tokens", "64"], "--ridge-tokens"),
    ([*EVAL, "--target-step-ms", "10"], "--target-step-ms"),
    ([*EVAL, "--sibling-probs", "0.5,0.2"], "--sibling-probs"),
    ([*EVAL, "--adaptive-convention", "exclusive"], "--adaptive-convention"),
    ([*EVAL, "--alpha", "0.7", "--task", "code"], "--task"),
    ([*EVAL, "--acceptance-length", "2.5", "--temperature", "1"], "--temperature"),
    ([*EVAL, "--alpha", "0.7", "--alphas", "0.8,0.6"], "--alpha"),
    ([*EVAL, "--window", "4"], "window"),
    (["evaluate", "-H", "h100-sxm", "-m", "deepseek-v3", "-d", "mtp", "--k", "3", "--topk", "4", "--tp", "8",
      "--num-draft-tokens", "8"], "topk"),
    ([*EVAL, "--num-draft-tokens", "8"], "--num-draft-tokens"),
    ([*EVAL, "--draft-tp", "1"], "draft_tp"),
    ([*EVAL, "--tree", str(ROOT / "tests" / "data" / "tree_seed.yaml")], "--k"),
    ([*EVAL, "-o", "x.csv"], "--output"),
    ([*EVAL, "--grid", str(ROOT / "examples" / "grid.csv"), "-o", "x.csv"], "with --grid"),
    (["plan", str(BUCKETS), "--tp", "2"], "--tp"),
    ([*SIM, "--no-such-flag"], "--no-such-flag"),
]


@pytest.mark.parametrize(("argv", "names"), INAPPLICABLE, ids=[" ".join(a[-3:]) for a, _ in INAPPLICABLE])
def test_an_option_that_would_change_nothing_is_refused(argv: list[str], names: str, tmp_path: Path) -> None:
    before = snapshot(tmp_path)
    r = invoke(*argv, cwd=tmp_path)
    assert_clean_failure(r, (names,), before, snapshot(tmp_path), " ".join(argv))


def _grid(tmp_path: Path, extra: dict[str, Any]) -> Path:
    path = tmp_path / "in" / "grid.csv"
    path.parent.mkdir(exist_ok=True)
    pd.DataFrame([{"hardware": "h100-sxm", "model": "llama-3.1-8b", "draft": "eagle3", "k": 3, **extra}]).to_csv(
        path, index=False)
    return path


@pytest.mark.parametrize(("extra", "names"), [
    ({"bogus_column": 7}, "bogus_column"), ({"memory_utilisation": 0.8}, "memory_utilization"),
    ({"speedup": 2.0}, "speedup"), ({"Batch": 4}, "batch"),
])
def test_a_grid_column_no_field_claims_is_refused(extra: dict[str, Any], names: str, tmp_path: Path) -> None:
    grid = _grid(tmp_path, extra)
    out = tmp_path / "out"
    out.mkdir()
    before = snapshot(out)
    r = invoke("evaluate", "--grid", str(grid), "-o", str(out / "answers.csv"))
    assert_clean_failure(r, (names,), before, snapshot(out), f"grid with {extra}")


def _with(data: dict[str, Any], path: tuple[Any, ...], key: str, value: Any) -> dict[str, Any]:
    """`data` (a copy) with `key: value` added to the mapping at `path`."""
    out = yaml.safe_load(yaml.safe_dump(data))
    node: Any = out
    for p in path:
        node = node[p]
    node[key] = value
    return dict(out)


def _mappings(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a mapping in a scenario, except those whose keys are data (a context mix {tokens: share})."""
    out: list[tuple[Any, ...]] = []
    if isinstance(data, dict):
        if not (path and path[-1] == "context"):
            out.append(path)
        for k, v in data.items():
            out += _mappings(v, (*path, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += _mappings(v, (*path, i))
    return out


def _refused(command: list[str], scenario: Path, data: dict[str, Any], tmp_path: Path, names: str) -> None:
    path = tmp_path / scenario.name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    before = snapshot(out)
    argv = [command[0], str(path), *(["-o", str(out / "r")] if command[0] == "report" else []),
            *(["-o", str(out / "s.csv")] if command[0] == "sweep" else []), *command[1:]]
    r = invoke(*argv)
    assert_clean_failure(r, (names,), before, snapshot(out), f"{command[0]} {scenario.name} + {names}")


@settings(max_examples=int(os.environ.get("SPECSIM_FUZZ_EXAMPLES", "40")), deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_an_unknown_key_anywhere_in_a_scenario_is_refused_by_every_command(data: st.DataObject,
                                                                          tmp_path: Path) -> None:
    scenario = data.draw(st.sampled_from(SCENARIOS))
    raw = yaml.safe_load(scenario.read_text())
    where = data.draw(st.sampled_from(_mappings(raw)))
    key = data.draw(st.sampled_from(["bogus", "memory_utilisation", "drafts_", "Hours", "tokenz", "rate_rsp"]))
    commands = [["plan"], ["report"], ["sweep", "--batch", "1,8"]] + ([["simulate", "--requests", "20"]]
                                                                      if scenario in TRAFFIC else [])
    command = data.draw(st.sampled_from(commands))
    _refused(command, scenario, _with(raw, where, key, 1), tmp_path, key)


@pytest.mark.parametrize(("scenario", "edit", "names"), [
    (BUCKETS, lambda d: {**d, "load": {"buckets": [{**b, "hours": 20} for b in d["load"]["buckets"][:2]]}},
     "sum to 24"),
    (BUCKETS, lambda d: {**d, "drafts": [{"method": "eagle3", "window": 4}]}, "window"),
    (BUCKETS, lambda d: {**d, "drafts": [{"method": "eagle3", "acceptance": {"alpha": 0.7, "k": 3}}]}, "k"),
])
def test_a_scenario_value_that_would_change_nothing_is_refused(scenario: Path, edit: Any, names: str,
                                                               tmp_path: Path) -> None:
    raw = yaml.safe_load(scenario.read_text())
    _refused(["plan"], scenario, edit(raw), tmp_path, names)

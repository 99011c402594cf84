"""The parallel layout from the command line, a grid and a scenario: the same layout gives the same answer by
every route, and a layout that cannot run gets one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.corpus.harness import assert_clean_failure, invoke, snapshot

BASE = ("evaluate", "-H", "h200", "-m", "deepseek-v3", "-d", "mtp", "--k", "2", "--weight-dtype", "fp8_block",
        "-b", "64", "-L", "4096", "--acceptance-length", "2.4")


def _json(*extra: str) -> dict:
    r = invoke(*BASE, *extra, "-f", "json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def test_dp_attention_and_ep_change_the_answer_and_say_so() -> None:
    tp = _json("--tp", "8")
    dp = _json("--tp", "1", "--dp", "8", "--ep", "8")
    assert tp["priced_layout"] == "tp 8" and dp["priced_layout"] == "tp 1, dp 8, ep 8"
    assert tp["gpus"] == dp["gpus"] == 8
    # each GPU reads the KV of its own 8 sequences instead of all 64: the plain step is faster at this batch
    assert dp["baseline_step_ms"] < tp["baseline_step_ms"]
    assert dp["memory_gib_per_gpu"] != tp["memory_gib_per_gpu"]


def test_a_grid_and_a_scenario_take_the_same_layout(tmp_path: Path) -> None:
    flags = _json("--tp", "1", "--dp", "8", "--ep", "8")
    grid = tmp_path / "grid.csv"
    grid.write_text("hardware,model,draft,k,tp,dp,ep,weight_dtype,batch,context,acceptance_length\n"
                    "h200,deepseek-v3,mtp,2,1,8,8,fp8_block,64,4096,2.4\n")
    r = invoke("evaluate", "--grid", str(grid), "-f", "json")
    assert r.code == 0, r.err
    row = json.loads(r.out)[0]
    assert row["speedup"] == pytest.approx(flags["speedup"], rel=1e-9)
    scenario = yaml.safe_load(Path("scenarios/deepseek-v3-mtp.yaml").read_text())
    scenario.update(tp=1, dp=8, ep=8)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    r = invoke("plan", str(path), "-f", "json")
    assert r.code == 0, r.err


@pytest.mark.parametrize(("extra", "expect"), [
    (("--tp", "8", "--ep", "3"), ("ep 3 must divide",)),
    (("--tp", "8", "--layer-split"), ("--layer-split", "--pp >= 2")),
    (("--tp", "8", "--cp", "3"), ("context parallelism 3",)),
    (("--tp", "8", "--dp", "0"), ("--dp must be in [1, 1,024], got 0",)),
])
def test_a_layout_that_cannot_run_gets_one_line(tmp_path: Path, extra: tuple[str, ...], expect: tuple[str, ...]
                                                ) -> None:
    before = snapshot(tmp_path)
    r = invoke(*BASE, *extra, cwd=tmp_path)
    assert_clean_failure(r, expect, before, snapshot(tmp_path), " ".join(extra))


def test_a_scenario_field_is_checked(tmp_path: Path) -> None:
    scenario = yaml.safe_load(Path("scenarios/deepseek-v3-mtp.yaml").read_text())
    scenario.update(tp=8, ep=16, dp=1)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    before = snapshot(tmp_path)
    r = invoke("plan", str(path), cwd=tmp_path)
    assert_clean_failure(r, ("s.yaml", "ep 16 must divide"), before, snapshot(tmp_path), "scenario ep")

"""What `specsim plan` shows a person: policies that cover every batch, words that are true, 80 columns."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import yaml

from specsim.advise.plan import plan_scenario as plan
from specsim.plan.summary import pays_phrase
from specsim.scenario.scenario import load_scenario, parse_scenario
from tests._cli import run

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
ANALYTIC = [p for p in SCENARIOS if "traffic" not in p.stem]


def _plan_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    code, out, err = run(capsys, "plan", *args, "-f", "json")
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_policy_and_engine_schedules_cover_every_batch(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each batch size from 1 to the top of the schedule belongs to exactly one band, in the policy and in
    vLLM's and TensorRT-LLM's per-batch schedules (the grid's sample points used to leave 33-35 out)."""
    data = _plan_json(capsys, str(path))
    for policy in (data["policy"],):
        assert policy[0]["batch_from"] == 1
        for a, b in itertools.pairwise(policy):
            assert b["batch_from"] == a["batch_to"] + 1, (a, b)
    cfg = data["engine_configs"]
    if cfg.get("vllm"):
        bands = cfg["vllm"]["--speculative-config"].get("num_speculative_tokens_per_batch_size")
        if bands:
            assert bands[0][0] == 1
            for a, b in itertools.pairwise(bands):
                assert b[0] == a[1] + 1, (a, b)
    if cfg.get("sglang") and "by_batch" in cfg["sglang"]:
        bands = cfg["sglang"]["by_batch"]
        for a, b in itertools.pairwise(bands):
            assert b["batch_from"] == a["batch_to"] + 1, (a, b)


def test_vllm_dynamic_profile_reaches_the_schedules_largest_k(capsys: pytest.CaptureFixture[str]) -> None:
    """The prompt-lookup scenario runs k = 12 at low load: vLLM's dynamic config must allow 12 drafts."""
    data = _plan_json(capsys, str(ROOT / "scenarios" / "code-edit-prompt-lookup.yaml"))
    ks = [seg["k"] for seg in data["policy"] if seg["k"] > 0]
    dyn = data["engine_configs"]["vllm"]["dynamic_speculative_config"]
    assert max(ks) > 8  # the case the cap of 8 got wrong
    assert dyn["max_num_speculative_tokens"] >= max(ks)
    assert all(len(stats) == dyn["max_num_speculative_tokens"] + 1 for stats in dyn["batch_stats"].values())


def _scenario(tmp_path: Path, hardware: str, model: str, tp: int, drafts: str, buckets: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(f"name: t\nhardware: {hardware}\nmodel: {model}\ntp: {tp}\ndrafts: {drafts}\n"
                    f"load:\n  buckets:\n{buckets}")
    return path


def test_sglang_tree_caveat_only_on_hopper(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """SGLang's FA3-only-for-chains caveat is about Hopper: an A100 plan with trees does not carry it."""
    buckets = "    - {name: low, hours: 24, batch: 1, context: 2048}\n"
    for hw, expected in (("h100-sxm", True), ("a100-sxm-80gb", False)):
        data = _plan_json(capsys, str(_scenario(tmp_path, hw, "llama-3.1-8b", 1, "[eagle3]", buckets)),
                          "--engine", "sglang")
        sg = data["engine_configs"]["sglang"]
        assert sg["--speculative-eagle-topk"] > 1  # a tree at batch 1, so the caveat is in question
        assert ("caveat" in sg) is expected, hw


def test_where_a_draft_pays_is_a_range(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """n-gram on Mixtral over 2x A100 loses at batch 1 (verifying 4 tokens wakes more experts than one) and
    pays above: the plan says so as a range, not 'stops paying at batch 1'."""
    buckets = ("    - {name: day, hours: 12, batch: 32, context: 2048}\n"
               "    - {name: night, hours: 12, batch: 2, context: 2048}\n")
    path = _scenario(tmp_path, "a100-sxm-80gb", "mixtral-8x7b", 2, "[ngram]", buckets)
    p = plan(load_scenario(path))
    ranges = p.pays["ngram"]
    assert ranges and ranges[0][0] > 1  # not at batch 1
    assert p.gain > 1.0
    code, out, _ = run(capsys, "plan", str(path))
    assert code == 0
    assert f"ngram: batch {ranges[0][0]}-{ranges[0][1]}" in out
    assert "stops paying" not in out


def test_pays_phrase() -> None:
    assert pays_phrase([(1, 512)], 512) == "every batch up to 512"
    assert pays_phrase([(3, 90)], 512) == "batch 3-90"
    assert pays_phrase([], 512) == "never (batch 1-512)"
    assert pays_phrase([(1, 4), (9, 9)], 64) == "batch 1-4, 9"


def test_policy_lines_show_the_tree_shape(capsys: pytest.CaptureFixture[str]) -> None:
    """A tree band prints its shape, not its depth alone (depth 7 then k = 5 read as k rising with load); SGLang
    runs a tree per batch band, so its plan has them."""
    path = ROOT / "scenarios" / "chat-llama70b-h100.yaml"
    data = _plan_json(capsys, str(path), "-e", "sglang")
    trees = [seg for seg in data["policy"] if seg.get("num_draft_tokens")]
    assert trees
    code, out, _ = run(capsys, "plan", str(path), "-e", "sglang")
    assert code == 0
    words = " ".join(out.split())  # the policy sentence wraps at spaces
    seg = trees[0]
    span = str(seg["batch_from"]) if seg["batch_from"] == seg["batch_to"] else f"{seg['batch_from']}-{seg['batch_to']}"
    assert f"tree topk {seg['topk']} x {seg['num_draft_tokens']} nodes, depth {seg['k']} at {span}" in words


def _whole_at(out: str, width: int, texts: list[str]) -> None:
    """Every line within `width` (or one word alone: an id longer than the width), and every word of `texts`
    found whole among the output's words (wrapped at spaces, never cut)."""
    for line in out.splitlines():
        assert len(line) <= width or len(line.split()) == 1, line
    words = set(out.split())
    for text in texts:
        for word in text.split():
            assert word in words, word


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_plan_at_80_columns_leads_with_the_answer_and_cuts_nothing(
        path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`plan` prints the decision first in about 30 lines at 80 columns; `--details` adds what stands behind it
    (engine configs, the priors' sources with their ids); nothing is cut mid-word in either."""
    monkeypatch.setenv("COLUMNS", "80")
    data = _plan_json(capsys, str(path))
    code, out, err = run(capsys, "plan", str(path))
    assert code == 0, err
    assert "…" not in out
    lines = out.splitlines()
    assert len(lines) <= 32, len(lines)
    assert " ".join(lines[:4]).startswith(data["recommendation"][:60])  # the answer comes first
    _whole_at(out, 80, [data["recommendation"], *data["notes"]])
    for row in data["buckets"]:
        assert row["bucket"] in out and f"{row['batch']}" in out  # names whole
    assert "--speculative-config" not in out and "batch_stats" not in out  # engine dumps: --details
    code, full, err = run(capsys, "plan", str(path), "--details")
    assert code == 0, err
    assert full.startswith(out.rsplit("\n--details", 1)[0].rstrip("\n"))
    _whole_at(full, 80, [*data["details"], *data["notes"]])
    for name, cfg in data["engine_configs"].items():
        if isinstance(cfg, dict):
            assert f"\n{name}:\n" in full


def test_details_only_in_the_table_format(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "plan", str(ANALYTIC[0]), "--details", "-f", "json")
    assert code == 2 and err.count("\n") == 1 and "--details" in err


def test_engine_configs_written_as_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = ROOT / "scenarios" / "llama8b-1b-draft-h100.yaml"
    data = _plan_json(capsys, str(path))
    code, _, err = run(capsys, "plan", str(path), "--engine-configs", str(tmp_path / "cfg"))
    assert code == 0, err
    for name, cfg in data["engine_configs"].items():
        if cfg is None or name == "note":
            continue
        assert json.loads((tmp_path / "cfg" / f"{name}.json").read_text()) == cfg


def test_hugging_face_id_in_a_scenario(tmp_path: Path) -> None:
    """`model:` takes a Hugging Face id as `-m` does (it used to be read as a path beside the scenario)."""
    text = (ROOT / "scenarios" / "llama8b-1b-draft-h100.yaml").read_text()
    by_id = parse_scenario({**yaml.safe_load(text), "model": "meta-llama/Llama-3.1-8B-Instruct"},
                           str(tmp_path / "s.yaml"))
    assert by_id.model.name == "llama-3.1-8b"


def test_lookahead_plan_prices_its_branches_as_evaluate_does(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Lookahead verifies 1 + (W + G) k tokens per sequence, not k + 1: the plan's verify time for each bucket
    equals `specsim evaluate`'s (it was 9.9 ms against 34.4 ms at k = 3, batch 32)."""
    buckets = ("    - {name: day, hours: 12, batch: 32, context: 2048}\n"
               "    - {name: night, hours: 12, batch: 1, context: 2048}\n")
    path = _scenario(tmp_path, "h100-sxm", "llama-3.1-8b", 1, "[lookahead]", buckets)
    data = _plan_json(capsys, str(path))
    on = [row for row in data["buckets"] if row["k"] > 0]
    assert on  # batch 1 speculates
    for row in on:
        code, out, err = run(capsys, "evaluate", "-H", "h100-sxm", "-m", "llama-3.1-8b", "-d", "lookahead",
                             "--k", str(row["k"]), "--batch", str(row["batch"]), "--context", str(row["context"]),
                             "-f", "json")
        assert code == 0, err
        assert json.loads(out)["verify_ms"] == pytest.approx(row["verify_ms"], rel=1e-9)

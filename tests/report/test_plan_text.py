"""What the plan and speedup sections write: each engine's configuration as its own readable block with a
heading, and as a file beside the report linked from both pages (written with the rest of the report, or not
at all); and where each draft pays as a batch range, not a "stops paying at batch 1" beside a gain."""

from __future__ import annotations

import dataclasses
import html
import json
import re
from pathlib import Path
from typing import Any

import pytest

from specsim.engines.configs.layout import JSON_WIDTH, pretty_json
from specsim.errors import SpecsimError
from specsim.report import context, write
from specsim.report.sections.speedup import pays_text, speedup_section
from specsim.scenario.scenario import parse_scenario

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
ENGINES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM", "atom": "ATOM"}


def _code_blocks(md: str) -> list[list[str]]:
    blocks: list[list[str]] = []
    cur: list[str] | None = None
    for line in md.split("\n"):
        if line.startswith("```"):
            if cur is None:
                cur = []
            else:
                blocks.append(cur)
                cur = None
        elif cur is not None:
            cur.append(line)
    return blocks


def test_engine_configs_are_readable_blocks_and_files(tmp_path: Path) -> None:
    out = tmp_path / "rep"
    result = write.write_report(SCENARIOS / "llama8b-1b-draft-h100.yaml", out)
    data = json.loads((out / "plan.json").read_text())
    engines = {k: v for k, v in data["engine_configs"].items() if isinstance(v, dict)}
    assert set(engines) == set(ENGINES)  # a tree plan: every engine gets settings
    md = (out / "report.md").read_text()
    page = (out / "report.html").read_text()
    blocks = _code_blocks(md)
    assert sorted(result.files) == sorted(f"engine-configs/{k}.json" for k in engines)
    for name, cfg in engines.items():
        path = out / "engine-configs" / f"{name}.json"
        assert json.loads(path.read_text()) == cfg  # the file is the plan's configuration, as JSON
        # a heading, a link to the file, and the block itself (the same JSON as the file)
        assert f"#### {ENGINES[name]}" in md.split("\n")
        assert f"(engine-configs/{name}.json)" in md
        assert re.search(rf'<a href="engine-configs/{name}\.json"[^>]*>', page)
        assert re.search(rf"<h4[^>]*>{ENGINES[name]}</h4>", page)
        block = next(b for b in blocks if b and json.loads("\n".join(b)) == cfg)
        assert "\n".join(block) + "\n" == path.read_text()
        # readable: indented over several lines, no line longer than the page's width but for one long value
        assert len(block) > 3 and block[1].startswith("  ")
        long = [ln for ln in block if len(ln) > 110]
        assert all(ln.strip().count('": ') == 1 and ln.rstrip(",").endswith('"') for ln in long), long
    vllm = next(b for b in blocks if b and json.loads("\n".join(b)) == engines["vllm"])
    # long lists stay readable: vLLM's per-batch-size schedule on one line, its batch_stats packed by row
    assert any('"num_speculative_tokens_per_batch_size": [[' in ln for ln in vllm)
    assert len(vllm) < 80
    # the HTML shows each block in a <pre> that wraps, and not the old one-line-per-engine wall
    assert page.count('<pre><code>{') >= len(engines)
    assert "white-space:pre-wrap" in page and "word-break:break-all" not in page
    assert not any(ln.startswith("vllm: {") for ln in md.split("\n"))
    # a rerun replaces the files (they are the report's own), keeping the user's
    (out / "engine-configs" / "stale.json").write_text("{}")
    write.write_report(SCENARIOS / "llama8b-1b-draft-h100.yaml", out)
    assert sorted(p.name for p in (out / "engine-configs").iterdir()) == sorted(f"{k}.json" for k in engines)


def test_engine_config_files_are_written_with_the_report_or_not_at_all(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "rep"
    write.write_report(SCENARIOS / "deepseek-v3-mtp.yaml", out)
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert any(p.parts[0] == "engine-configs" for p in before)
    real = Path.write_text
    calls = {"n": 0}

    def fail_on_second_config(self: Path, text: str, *a: Any, **k: Any) -> int:
        if self.parent.name == "engine-configs":
            calls["n"] += 1
            if calls["n"] == 2:
                raise SpecsimError("disk full (simulated)")
        return real(self, text, *a, **k)

    monkeypatch.setattr(Path, "write_text", fail_on_second_config)
    with pytest.raises(SpecsimError, match="disk full"):
        write.write_report(SCENARIOS / "deepseek-v3-mtp.yaml", out)
    monkeypatch.undo()
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before  # the earlier report, whole; nothing half-written beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]


def test_pretty_json_round_trips_and_keeps_long_lists_compact() -> None:
    value = {"a": [[1, 2, 3]] * 30, "b": {str(i): i / 7 for i in range(40)}, "c": "x" * 300, "d": [],
             "e": {"f": {"g": [True, None, "s"]}}, "h": list(range(200))}
    text = pretty_json(value)
    assert json.loads(text) == value
    lines = text.split("\n")
    assert all(len(ln) <= JSON_WIDTH for ln in lines if '"c"' not in ln)
    assert len(lines) < 60  # 200 numbers and 40 entries packed, not one per line


def _pays_cell(md: str, draft: str) -> str:
    head = next(ln for ln in md.split("\n") if ln.startswith("| draft |"))
    col = [x.strip() for x in head.strip("|").split("|")].index("where speculation pays (batch range)")
    row = next(ln for ln in md.split("\n") if ln.startswith(f"| {draft} |"))
    return [x.strip() for x in row.strip("|").split("|")][col]


def test_pays_column_reads_the_plans_batch_ranges() -> None:
    """The bug report's case: n-gram on Mixtral, 2x A100, loses at batch 1-2 and pays above; the table must say
    where it pays (from the plan's `pays`), not that it stops paying at batch 1."""
    s = parse_scenario({"hardware": "a100-sxm-80gb", "model": "mixtral-8x7b", "tp": 2, "drafts": ["ngram"],
                        "load": {"buckets": [{"name": "busy", "batch": 64, "context": 4096, "hours": 12},
                                             {"name": "quiet", "batch": 2, "context": 4096, "hours": 12}]}}, "x")
    c = context.make_ctx(s)
    md = speedup_section(c).body
    cell = _pays_cell(md, "ngram")
    assert "stops paying" not in md and "gain over the day" in md
    pays = getattr(c.plan, "pays", None)
    if pays is not None:  # the plan records where each draft pays
        (lo, hi), = pays["ngram"]
        assert lo > 1  # the case of the bug report: it loses at the smallest batches
        assert cell == f"pays at batch {lo}-{hi}"
    else:  # an older plan: the first batch where plain decoding wins stands in
        assert cell.startswith(("pays at", "plain decoding wins at batch"))
    # gains of every draft are still there
    assert f"{c.data['per_draft_gain']['ngram']:.2f}x" in md


def test_pays_column_falls_back_to_the_crossover_without_pays() -> None:
    s = parse_scenario({"hardware": "h100-sxm", "model": "llama-3.1-8b", "drafts": ["eagle3"],
                        "load": {"buckets": [{"batch": 8, "context": 2048}]}}, "x")
    c = context.make_ctx(s)

    class OlderPlan:  # a Plan from before `pays` existed
        def __init__(self, inner: Any, crossover: dict[str, int | None]) -> None:
            self._inner, self.crossover = inner, crossover

        def __getattr__(self, name: str) -> Any:
            if name == "pays":
                raise AttributeError(name)
            return getattr(self._inner, name)

    top = c.plan.policy.top_batch
    cases = (({"eagle3": 40}, "pays at batch 1-39"), ({"eagle3": None}, f"pays at every batch up to {top}"))
    for crossover, want in cases:
        old = dataclasses.replace(c, plan=OlderPlan(c.plan, crossover))  # type: ignore[arg-type]
        assert _pays_cell(speedup_section(old).body, "eagle3") == want


def test_pays_phrases() -> None:
    assert pays_text([(3, 90)], None, 512) == "pays at batch 3-90"
    assert pays_text([(1, 512)], None, 512) == "pays at every batch up to 512"
    assert pays_text([], 1, 512).startswith("never pays")
    assert pays_text([(1, 4), (9, 9), (20, 64)], 5, 512) == "pays at batch 1-4, 9, 20-64"
    assert html.escape(pays_text([(2, 3)], None, None)) == "pays at batch 2-3"

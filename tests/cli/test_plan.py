"""`--cost-model` on the commands that price a scenario or a step: the flag reaches the cost model."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests._cli import run

SCENARIO = str(Path(__file__).resolve().parents[2] / "scenarios" / "chat-llama70b-h100.yaml")
HAVE_TABLES = all(importlib.util.find_spec(m) is not None for m in ("aiconfigurator_core", "pyarrow"))


def test_unknown_cost_model_is_one_line_and_status_2(capsys) -> None:
    for argv in (("plan", SCENARIO), ("evaluate", "-H", "h100-sxm", "-m", "llama-3.1-8b", "-d", "eagle3", "--k", "3")):
        code, out, err = run(capsys, *argv, "--cost-model", "bogus")
        assert code == 2 and "unknown cost model 'bogus'" in err and "Traceback" not in err + out


@pytest.mark.skipif(not HAVE_TABLES, reason="aiconfigurator-core / pyarrow not installed (.[tables])")
def test_table_cost_model_changes_the_priced_step(capsys) -> None:
    """The measured tables price the same step differently from the roofline, and the answer says which."""
    def evaluate(cm: str) -> dict:
        code, out, _ = run(capsys, "evaluate", "-H", "h100-sxm", "-m", "llama-3.1-8b", "-d", "eagle3", "--k", "3",
                           "--batch", "16", "--cost-model", cm, "-f", "json")
        assert code == 0
        return json.loads(out)

    roof, table = evaluate("roofline"), evaluate("table")
    assert roof["baseline_step_ms"] != pytest.approx(table["baseline_step_ms"], rel=1e-3)
    assert "roofline" in roof["cost_source"] and "table" in table["cost_source"].lower()
    code, out, _ = run(capsys, "plan", SCENARIO, "--cost-model", "table", "-f", "json")
    plan = json.loads(out)
    assert code == 0 and "table" in plan["cost_model"].lower()


def test_engine_flag_overrides_the_scenarios_engine(capsys) -> None:
    """`plan -e sglang` prices the step as SGLang does: the same as a scenario that says engine: sglang."""
    code, out, _ = run(capsys, "plan", SCENARIO, "-e", "sglang", "-f", "json")
    flagged = json.loads(out)
    code2, out2, _ = run(capsys, "plan", SCENARIO, "-f", "json")
    default = json.loads(out2)
    assert code == code2 == 0 and flagged["engine"] == "sglang" and default["engine"] == "vllm"
    assert [b["baseline_step_ms"] for b in flagged["buckets"]] != [b["baseline_step_ms"] for b in default["buckets"]]
    code, _, err = run(capsys, "plan", SCENARIO, "-e", "tgi")
    assert code == 2 and "unknown engine 'tgi'" in err


def test_engine_flag_equals_the_engine_field(capsys, tmp_path: Path) -> None:
    text = Path(SCENARIO).read_text()
    (tmp_path / "s.yaml").write_text(text.replace("hardware: h100-sxm", "engine: sglang\nhardware: h100-sxm", 1))
    code, out, _ = run(capsys, "plan", str(tmp_path / "s.yaml"), "-f", "json")
    code2, out2, _ = run(capsys, "plan", SCENARIO, "-e", "sglang", "-f", "json")
    assert code == code2 == 0
    a, b = json.loads(out), json.loads(out2)
    assert [x["step_ms"] for x in a["buckets"]] == pytest.approx([x["step_ms"] for x in b["buckets"]])

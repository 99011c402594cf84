"""One question, one answer at every door: each `evaluate` option and its grid column give the same answer to the
last digit; every field of a door is an option of its command and every option of a question is a field; and each
field changes the answer, or is documented as not priced."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from specsim.advise.answer import ANSWER
from specsim.fields import FIELDS, fields_of
from tests.corpus.harness import ROOT, invoke

BASE = {"hardware": "h100-sxm", "model": "llama-3.1-8b", "draft": "eagle3", "k": "3", "batch": "4",
        "context": "2048"}
TREE = str(ROOT / "tests" / "data" / "tree_seed.yaml")
BARE = str(ROOT / "tests" / "data" / "tree_bare.yaml")  # a tree shape without its acceptance table
METRICS = str(ROOT / "examples" / "vllm_metrics.txt")
ABSTRACT = {"draft_cost_ratio": "0.05", "alpha": "0.8", "k": "4"}
DEPLOYMENT = str(ROOT / "tests" / "data" / "deployment_llama8b_h100.yaml")

#: per evaluate field: a question that sets it (to a value other than its default)
CASES: dict[str, dict[str, str]] = {
    "hardware": {**BASE, "hardware": "h200"},
    "model": {**BASE, "model": "qwen3-8b"},
    "weight_dtype": {**BASE, "weight_dtype": "fp8"},
    "kv_dtype": {**BASE, "kv_dtype": "fp8"},
    "memory_utilization": {**BASE, "memory_utilization": "0.5"},
    "tp": {**BASE, "tp": "2"},
    "dp": {**BASE, "model": "mixtral-8x7b", "tp": "1", "dp": "2", "ep": "2"},
    "ep": {**BASE, "model": "mixtral-8x7b", "tp": "2", "ep": "2"},
    "pp": {**BASE, "pp": "2"},
    "cp": {**BASE, "tp": "2", "cp": "2"},
    "layer_split": {**BASE, "pp": "2", "layer_split": "true"},
    "engine": {**BASE, "engine": "sglang"},
    "deployment": {**BASE, "deployment": DEPLOYMENT},
    "cost_model": {**BASE, "cost_model": "table"},
    "draft": {**BASE, "draft": "llama-3.2-1b"},
    "k": {**BASE, "k": "5"},
    "topk": {**BASE, "topk": "4", "num_draft_tokens": "16"},
    "num_draft_tokens": {**BASE, "topk": "4", "num_draft_tokens": "8"},
    "draft_tp": {**BASE, "tp": "2", "draft": "llama-3.2-1b", "draft_tp": "1"},
    "window": {**BASE, "draft": "lookahead", "window": "4"},
    "guesses": {**BASE, "draft": "lookahead", "guesses": "3"},
    "tree": {key: v for key, v in {**BASE, "tree": TREE}.items() if key != "k"},
    "adaptive_stop": {**BASE, "k": "5", "adaptive_stop": "0.6,0.1"},
    "adaptive_convention": {**BASE, "k": "5", "adaptive_stop": "0.6,0.1", "adaptive_convention": "exclusive"},
    "acceptance_length": {**BASE, "acceptance_length": "2.9"},
    "alpha": {**BASE, "alpha": "0.7"},
    "alphas": {**BASE, "alphas": "0.9,0.5,0.2"},
    "acceptance": {**BASE, "acceptance": METRICS},
    "sibling_probs": {key: v for key, v in {**BASE, "tree": BARE, "sibling_probs": "0.5,0.2"}.items() if key != "k"},
    "task": {**BASE, "task": "code"},
    "temperature": {**BASE, "temperature": "1.0"},
    "checkpoint": {**BASE, "checkpoint": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"},
    "batch": {**BASE, "batch": "64"},
    "context": {**BASE, "context": "8k"},
    "label": {**BASE, "label": "a row"},
    "draft_cost_ratio": {**ABSTRACT, "draft_cost_ratio": "0.1"},
    "target_step_ms": {**ABSTRACT, "target_step_ms": "20"},
    "ridge_tokens": {**ABSTRACT, "batch": "64", "ridge_tokens": "128"},
    "extra_overhead_ms": {**ABSTRACT, "extra_overhead_ms": "0.5"},
}
#: fields that are not priced: they are echoed (documented so in their help)
NOT_PRICED = {"label"}


def _flags(case: dict[str, str]) -> list[str]:
    out: list[str] = []
    for name, value in case.items():
        f = FIELDS[name]
        out += [f.flag] if f.kind == "bool" else [f.flag, value]
    return out


def _evaluate(case: dict[str, str]) -> dict[str, Any]:
    r = invoke("evaluate", *_flags(case), "-f", "json")
    assert r.code == 0, r.err
    return dict(json.loads(r.out))


def _grid(case: dict[str, str], tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "grid.csv"
    pd.DataFrame([case]).to_csv(path, index=False)
    r = invoke("evaluate", "--grid", str(path), "-f", "json")
    assert r.code == 0, r.err
    rows = json.loads(r.out)
    assert len(rows) == 1 and rows[0]["error"] == "", rows
    return dict(rows[0])


def _same(a: Any, b: Any) -> bool:
    if a is None or (isinstance(a, float) and math.isnan(a)):
        return b is None or (isinstance(b, float) and math.isnan(b))
    return bool(a == b)


def _tables_installed() -> bool:
    from specsim.cost.aiconfigurator import installed_version

    return installed_version() is not None


def _needs(name: str) -> None:
    if name == "cost_model" and not _tables_installed():
        pytest.skip("--cost-model table needs the tables extra")


def test_every_evaluate_field_has_a_case() -> None:
    assert {f.name for f in fields_of("evaluate")} == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_grid_column_answers_as_its_flag_to_the_last_digit(name: str, tmp_path: Path) -> None:
    _needs(name)
    flag, cell = _evaluate(CASES[name]), _grid(CASES[name], tmp_path)
    differ = {k: (flag.get(k), cell.get(k)) for k in ANSWER if not _same(flag.get(k), cell.get(k))}
    assert not differ, differ


#: where dropping the field leaves no question (or the default is the case's value), the value it changes from
OTHER: dict[str, dict[str, str]] = {
    "hardware": BASE, "model": BASE, "draft": BASE, "k": BASE, "batch": BASE, "context": BASE,
    "draft_cost_ratio": ABSTRACT, "tree": {**CASES["tree"], "tree": str(ROOT / "tests" / "data" / "tree_chain3.yaml")},
    "topk": {**CASES["topk"], "topk": "2"}, "draft_tp": {**CASES["draft_tp"], "draft_tp": "2"},
    "ep": {**CASES["ep"], "ep": "1"}, "dp": CASES["ep"],
    "window": {**CASES["window"], "window": "7"}, "guesses": {**CASES["guesses"], "guesses": "7"},
    "adaptive_convention": CASES["adaptive_stop"], "layer_split": CASES["pp"],
    "sibling_probs": {key: v for key, v in CASES["sibling_probs"].items() if key != "sibling_probs"},
}


@pytest.mark.parametrize("name", sorted(set(CASES) - NOT_PRICED))
def test_each_field_changes_the_answer(name: str) -> None:
    """The case against the same question without the field (or with another value): the figures or the echo
    of what was priced move."""
    _needs(name)
    other = OTHER.get(name, {key: v for key, v in CASES[name].items() if key != name})
    a, b = _evaluate(CASES[name]), _evaluate(other)
    moved = [k for k in ANSWER if not _same(a.get(k), b.get(k))]
    assert moved, f"{FIELDS[name].flag} changed nothing in the answer"


def test_evaluate_takes_exactly_its_fields_as_options() -> None:
    """The command's options are the door's fields (and its own: --grid, --output, --format)."""
    from typer.main import get_command

    from specsim.cli.main import _register, app

    _register(["evaluate"])
    command = get_command(app).commands["evaluate"]  # type: ignore[attr-defined]
    names = {p.name for p in command.params}
    fields = {f.name for f in fields_of("evaluate")}
    assert fields <= names
    assert names - fields == {"grid", "output", "fmt", *(f"{f.name}__{o}" for f in fields_of("evaluate")
                                                        for o in f.old)}
    for p in command.params:
        if p.name in fields:
            assert FIELDS[p.name].flag in p.opts and FIELDS[p.name].help in (p.help or "")


def test_a_partly_answered_grid_writes_every_row_and_exits_4(tmp_path: Path) -> None:
    rows = pd.DataFrame([BASE, {**BASE, "k": "-1"}, BASE])
    path, out = tmp_path / "g.csv", tmp_path / "out.csv"
    rows.to_csv(path, index=False)
    r = invoke("evaluate", "--grid", str(path), "-o", str(out))
    assert r.code == 4 and "1 of 3 rows" in r.err and len(r.err.strip().splitlines()) == 1
    got = pd.read_csv(out, keep_default_na=False)
    assert list(got["error"] == "") == [True, False, True] and "column 'k'" in got["error"][1]


def test_a_grid_no_row_of_which_is_answered_is_bad_input_and_writes_nothing(tmp_path: Path) -> None:
    path, out = tmp_path / "g.csv", tmp_path / "out.csv"
    pd.DataFrame([{**BASE, "k": "-1"}]).to_csv(path, index=False)
    r = invoke("evaluate", "--grid", str(path), "-o", str(out))
    assert r.code == 2 and not out.exists() and "no row could be answered" in r.err


@pytest.mark.parametrize(("column", "hint"), [("bogus_column", "specsim evaluate --help lists them"),
                                               ("memory_utilisation", "did you mean memory_utilization"),
                                               ("speedup", "is an answer")])
def test_a_column_no_field_claims_is_refused_with_the_nearest(column: str, hint: str, tmp_path: Path) -> None:
    path = tmp_path / "g.csv"
    path.write_text(pd.DataFrame([{**BASE, column: "7"}]).to_csv(index=False))
    r = invoke("evaluate", "--grid", str(path))
    assert r.code == 2 and hint in r.err and len(r.err.strip().splitlines()) == 1, r.err


def test_old_spellings_are_one_field(tmp_path: Path) -> None:
    old = _evaluate({**BASE, "weight_dtype": "fp8"})
    r = invoke("evaluate", *_flags(BASE), "--dtype", "fp8", "-f", "json")
    assert json.loads(r.out)["speedup"] == old["speedup"]
    path = tmp_path / "g.csv"
    path.write_text(io.StringIO(pd.DataFrame([{**BASE, "dtype": "fp8"}]).to_csv(index=False)).getvalue())
    assert json.loads(invoke("evaluate", "--grid", str(path), "-f", "json").out)[0]["speedup"] == old["speedup"]

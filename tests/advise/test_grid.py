from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from specsim.advise.grid import OUTPUTS, evaluate_grid
from specsim.cost.hardware import load_hardware
from specsim.cost.model import load_model
from specsim.drafts.build import make_draft
from specsim.step.evaluate import Target, bundled_engine, config_metrics


def test_every_row_equals_evaluate_for_that_configuration() -> None:
    rows = pd.DataFrame({
        "hardware": ["h100-sxm", "h100-sxm", "a100-sxm-80gb", "h100-sxm"],
        "model": ["llama-3.1-8b", "llama-3.1-70b", "llama-3.1-8b", "llama-3.1-8b"],
        "tp": [1, 8, 1, 1], "engine": ["vllm", "sglang", "hf", ""],
        "draft": ["eagle3", "eagle3", "ngram", "llama-3.2-1b"], "k": [3, 5, 4, 4],
        "batch": [1, 32, 1, 16], "context": [1024, 4096, 512, 2048], "note": ["a", "b", "c", "d"],
    })
    out = evaluate_grid(rows)
    assert list(out["note"]) == ["a", "b", "c", "d"]  # other columns carried through, order kept
    assert (out["error"] == "").all()
    for i, r in rows.iterrows():
        t = Target(load_hardware(r["hardware"]), load_model(r["model"]), int(r["tp"]),
                   engine=bundled_engine(r["engine"] or "vllm"))
        m = config_metrics(t, make_draft(r["draft"], t.model), int(r["k"]), int(r["batch"]), int(r["context"]))
        for name in ("step_ms", "speedup", "throughput_tok_s", "tokens_per_step"):
            assert out.loc[i, name] == pytest.approx(float(getattr(m, name) if name != "step_ms" else m.step_ms))


def test_measured_acceptance_length_is_tokens_per_step_and_scales_speedup_linearly() -> None:
    base = {"hardware": "h100-sxm", "model": "llama-3.1-8b", "draft": "eagle3", "k": 3, "batch": 4}
    out = evaluate_grid(pd.DataFrame([{**base, "acceptance_length": 2.0}, {**base, "acceptance_length": 3.0}]))
    assert list(out["tokens_per_step"]) == [2.0, 3.0]
    assert out["speedup"][1] / out["speedup"][0] == pytest.approx(1.5)
    assert set(out["acceptance_source"]) == {"measured acceptance length"}


@pytest.mark.parametrize(("row", "message"), [
    ({"hardware": "h900"}, "unknown hardware 'h900'"),
    ({"k": -1}, "column 'k' must be in \\[0, 64\\], got -1"),
    ({"batch": 0}, "column 'batch' must be in \\[1, 1,000,000\\], got 0"),
    ({"acceptance_length": 5.5}, "acceptance_length 5.5 is outside \\[1, 4\\]"),
    ({"alpha": 1.5}, "column 'alpha' must be in \\[0, 1\\]"),
    ({"model": "llama-3.1-405b"}, "does not fit: .* GiB per GPU needed of .* GiB"),
    ({"cost_model": "bogus"}, "unknown cost model 'bogus'"),
])
def test_a_bad_row_gets_its_reason_and_blank_outputs_and_others_are_unaffected(row: dict, message: str) -> None:
    good = {"hardware": "h100-sxm", "model": "llama-3.1-8b", "draft": "eagle3", "k": 3, "batch": 4}
    out = evaluate_grid(pd.DataFrame([good, {**good, **row}, good]))
    assert out["error"][1] and pd.Series([out["error"][1]]).str.contains(message).all(), out["error"][1]
    assert np.isnan(out["speedup"][1]) and np.isnan(out["step_ms"][1])
    assert out["error"][0] == out["error"][2] == "" and out["speedup"][0] == out["speedup"][2]


def test_outputs_are_the_documented_columns() -> None:
    out = evaluate_grid(pd.DataFrame([{"hardware": "h100-sxm", "model": "llama-3.1-8b", "draft": "none"}]))
    assert set(OUTPUTS) <= set(out.columns)
    assert out["speedup"][0] == pytest.approx(1.0)  # no draft: plain decoding


def test_a_cost_model_column_prices_the_row_as_evaluate_cost_model_does() -> None:
    """A row with cost_model = roofline equals a blank row on a roofline profile, and the same
    Target built with `with_cost_model` gives the grid's figure."""
    base = {"hardware": "h100-sxm", "model": "llama-3.1-8b", "draft": "eagle3", "k": 3, "batch": 8}
    out = evaluate_grid(pd.DataFrame([base, {**base, "cost_model": "roofline"}]))
    assert out["step_ms"][0] == pytest.approx(out["step_ms"][1])
    hw = load_hardware("h100-sxm").with_cost_model("roofline")
    t = Target(hw, load_model("llama-3.1-8b"), 1, engine=bundled_engine("vllm"))
    m = config_metrics(t, make_draft("eagle3", t.model), 3, 8, 1024)
    assert out["step_ms"][1] == pytest.approx(float(m.step_ms))


def test_a_held_out_source_never_supplies_the_prior() -> None:
    """The prior a row gets, and the same row with that prior's own source held out: another entry."""
    from specsim.acceptance.priors import load_catalogue

    base = {"hardware": "h100-sxm", "model": "llama-3.1-8b", "draft": "eagle3", "k": 3, "batch": 1}
    first = evaluate_grid(pd.DataFrame([base]))
    entry_id = first["acceptance_source"][0].split()[1]
    source = next(e.source for e in load_catalogue().entries if e.id == entry_id)
    held = evaluate_grid(pd.DataFrame([{**base, "prior_held_out_source": source}]))
    assert held["error"][0] == "" and entry_id not in held["acceptance_source"][0]
    other = held["acceptance_source"][0].split()[1]
    assert next(e.source for e in load_catalogue().entries if e.id == other) != source

from __future__ import annotations

import pandas as pd
import pytest

from specsim.validation.corpus import COLUMNS, load_corpus
from specsim.validation.mapping import map_row, methods, to_grid


def test_every_row_names_its_source_and_ids_are_unique() -> None:
    c = load_corpus()
    assert c["id"].is_unique
    assert c["source"].fillna("").str.strip().ne("").all()
    assert set(COLUMNS) <= set(c.columns)


def test_every_unpriced_row_says_why() -> None:
    c = load_corpus()
    grid, reasons = to_grid(c)
    assert len(grid) + len(reasons) == len(c)
    assert reasons.str.len().gt(0).all()


def test_rows_listed_unpriced_exist_and_are_refused_with_their_reason() -> None:
    """methods.yaml's unpriced_rows (a load the source does not state) name real corpus rows, each left
    out with its own reason rather than priced at a default batch."""
    c, m = load_corpus(), methods()
    assert m.unpriced_rows and set(m.unpriced_rows) <= set(c["id"])
    _, reasons = to_grid(c)
    for row_id, reason in m.unpriced_rows.items():
        assert reasons[row_id] == reason and "load not stated" in reason


def test_method_defaults_and_engine_versions_name_sources() -> None:
    m = methods()
    for name, spec in m.methods.items():
        assert len(spec.source) > 40, name
    assert m.engine_profile("vllm", "0.10.1", "x") == "vllm-0.10"
    assert m.engine_profile("vllm", None, "eagle3-vllm-rtx3090") == "vllm-0.10"
    assert m.engine_profile("vllm", ">=0.16.0", "x") == "vllm"


def test_a_row_keeps_what_the_source_states() -> None:
    row = pd.Series({"id": "x", "group": "g", "engine": "sglang", "engine_version": "0.4.4", "speedup": 1.4,
                     "draft": "eagle3", "hardware": "h100-sxm", "model": "llama-3.1-8b", "draft_model": None,
                     "k": 3.0, "shape": "chain", "topk": float("nan"), "num_draft_tokens": float("nan"),
                     "num_gpus": 1.0, "tp": 1.0, "batch": 24.0, "context": float("nan"),
                     "acceptance_length": 2.9})
    grid, reason = map_row(row)
    assert reason == "" and grid is not None
    assert grid["k"] == 3 and grid["batch"] == 24 and grid["acceptance_length"] == pytest.approx(2.9)
    assert "topk" not in grid  # a chain

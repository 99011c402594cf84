"""The long-context corpus (specsim/validation/data/long_context.csv) and its scorer (`validate --long-context`).

Schema checks on every row, the sparse-KV draft's equivalence to its base, and the scorer's figures against a
hand computation: a MagicDec row asked directly through the public grid (not through the corpus mapping), the
computed acceptance length, the error and the group medians. Skips when the data file is absent.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specsim.advise.grid import evaluate_grid
from specsim.cost.model import load_model
from specsim.errors import SpecsimError
from specsim.validation.long_context import (
    MIN_CONTEXT,
    LongContextReport,
    corpus_path,
    load_long_context,
    score_long_context,
    sparse_kv_draft,
    summary,
)
from specsim.validation.mapping import map_row

pytestmark = pytest.mark.skipif(not corpus_path().is_file(), reason="long_context.csv is not shipped")


@pytest.fixture(scope="module")
def corpus() -> pd.DataFrame:
    return load_long_context()


@pytest.fixture(scope="module")
def result(corpus: pd.DataFrame) -> LongContextReport:
    return score_long_context(corpus)


def test_every_row_names_its_source_and_figure(corpus: pd.DataFrame) -> None:
    assert corpus["id"].is_unique
    for col in ("source", "url", "locator", "quote", "group"):
        assert corpus[col].notna().all() and (corpus[col].astype(str).str.strip() != "").all(), col
    assert corpus["source"].nunique() >= 4 and len(corpus) >= 20


def test_numeric_fields_are_in_range(corpus: pd.DataFrame) -> None:
    assert (corpus["context"] >= MIN_CONTEXT).all()
    assert corpus["speedup"].between(0.1, 20).all()
    for col, lo, hi in (("k", 1, 64), ("batch", 1, 4096), ("num_gpus", 1, 64), ("acceptance_rate", 0, 1),
                        ("temperature", 0, 2), ("draft_kv_budget", 1, 65536)):
        v = corpus[col].dropna()
        assert v.between(lo, hi).all(), col
    tau = corpus.dropna(subset=["acceptance_length"])
    assert (tau["acceptance_length"] >= 1).all() and (tau["acceptance_length"] <= tau["k"] + 1).all()
    assert corpus["speedup_kind"].isin(["latency", "throughput"]).all()


def test_a_short_context_row_is_refused(corpus: pd.DataFrame, tmp_path: Path) -> None:
    bad = corpus.copy()
    bad.loc[0, "context"] = 8000
    path = tmp_path / "lc.csv"
    bad.to_csv(path, index=False)
    with pytest.raises(SpecsimError, match="context"):
        load_long_context(path)


def test_the_streaming_draft_prices_as_its_base_with_a_window() -> None:
    path, why = sparse_kv_draft("llama-3.1-8b", 512)
    assert not why
    draft, base = load_model(path), load_model("llama-3.1-8b")
    assert draft.n_params() == base.n_params()
    assert float(draft.kv_bytes_per_sequence(32000)) == float(base.kv_bytes_per_sequence(512))
    assert float(draft.kv_bytes_per_sequence(300)) == float(base.kv_bytes_per_sequence(300))
    assert sparse_kv_draft("deepseek-v3", 512)[1]  # MLA + MoE: refused, with a reason


def test_acceptance_length_is_the_pages_omega(corpus: pd.DataFrame) -> None:
    """MagicDec's tau from its acceptance rate: (1 - a^(k+1)) / (1 - a), by hand for k = 3 and 4 at a = 0.81."""
    rows = corpus.set_index("id")
    assert rows.loc["magicdec-a100-l31-8b-selfspec-ctx32k-b32", "acceptance_length"] == pytest.approx(
        (1 - 0.81 ** 4) / 0.19, abs=1e-4)
    assert rows.loc["magicdec-a100-l31-8b-selfspec-ctx32k-b128", "acceptance_length"] == pytest.approx(
        (1 - 0.81 ** 5) / 0.19, abs=1e-4)


def test_every_row_is_scored_or_has_a_reason(corpus: pd.DataFrame, result: LongContextReport) -> None:
    scored = set(result.rows["id"])
    assert scored.isdisjoint(result.not_askable.index)
    assert scored | set(result.not_askable.index) == set(corpus["id"])
    assert (result.not_askable.astype(str).str.len() > 0).all()


def test_a_row_asked_by_hand_gives_the_scorers_figure(result: LongContextReport) -> None:
    """The A100 batch-64 self-speculation row asked through the public grid, written out by hand."""
    rid = "magicdec-a100-l31-8b-selfspec-ctx32k-b64"
    path, _ = sparse_kv_draft("llama-3.1-8b", 512)
    tau = (1 - 0.81 ** 4) / 0.19
    grid = pd.DataFrame([{"id": rid, "hardware": "a100-sxm-80gb", "model": "llama-3.1-8b", "engine": "gpt-fast",
                          "draft": path, "k": 3, "tp": 8, "batch": 64, "context": 32000,
                          "acceptance_length": round(tau, 4), "check_context": False}])
    predicted = float(evaluate_grid(grid)["speedup"].iloc[0])
    row = result.rows[(result.rows["id"] == rid) & (result.rows["mode"] == "measured")].iloc[0]
    assert row["predicted"] == pytest.approx(predicted, rel=1e-9)
    assert row["error"] == pytest.approx(predicted / 1.38 - 1, rel=1e-9)
    assert bool(row["pays_right"]) == (predicted > 1)


def test_the_summary_is_the_median_of_the_rows(result: LongContextReport) -> None:
    table = summary(result)
    for mode in ("measured", "priors"):
        rows = result.rows[result.rows["mode"] == mode]
        overall = table[(table["mode"] == mode) & (table["group"] == "OVERALL")].iloc[0]
        errors = np.abs(rows["predicted"].to_numpy() / rows["published"].to_numpy() - 1)
        assert overall["n"] == len(rows)
        assert overall["median_abs_error"] == pytest.approx(float(np.median(errors)))
        pays = (rows["published"] > 1) == (rows["predicted"] > 1)
        assert overall["pays_right"] == pytest.approx(float(pays.mean()))


def test_a_decode_context_parallel_row_is_priced_at_its_cp(corpus: pd.DataFrame, result: LongContextReport) -> None:
    """A vLLM -dcp 4 row (its notes say cp=4) is asked with cp 4: the scorer's figure is the grid's at cp 4, and
    the split changes the answer (at cp 1 the same row prices differently)."""
    rid = "rtx6kpro-8xrtxpro6000-glm51-nvfp4-mtp3-dcp4-ctx32k-cc2"
    row = corpus.set_index("id").loc[rid]
    assert "cp=4" in row["notes"]
    grid, why = map_row(corpus[corpus["id"] == rid].iloc[0])
    assert grid is not None and not why and grid["cp"] == 4 and grid["tp"] == 8
    asked = pd.DataFrame([{k: v for k, v in grid.items() if k != "acceptance_length"}
                          | {"acceptance_length": float(row["acceptance_length"])}])
    at_cp4 = float(evaluate_grid(asked)["speedup"].iloc[0])
    at_cp1 = float(evaluate_grid(asked.assign(cp=1))["speedup"].iloc[0])
    scored = result.rows[(result.rows["id"] == rid) & (result.rows["mode"] == "measured")].iloc[0]
    assert scored["predicted"] == pytest.approx(at_cp4, rel=1e-9)
    assert abs(at_cp4 / at_cp1 - 1) > 1e-3

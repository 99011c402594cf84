"""`validate --serving`: the serving corpus names its sources and resolves to the tool (hardware, engines,
models, drafts), the scorer's arithmetic on hand-made predictions, the crossover hit rule, and the command on a
small corpus (and bad corpora: one line, exit 2)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from specsim.validation.serving import crossover_hits, load_corpus, score, state
from tests.corpus.harness import assert_clean_failure, invoke, snapshot

CORPUS = load_corpus()


def test_every_row_names_its_source_and_is_stated_or_says_why() -> None:
    assert CORPUS["source"].notna().all() and (CORPUS["source"].str.len() > 20).all()
    assert not CORPUS["id"].duplicated().any()
    reasons = [state(row, "priors").reason for _, row in CORPUS.iterrows()]
    stated = sum(not r for r in reasons)
    assert stated / len(CORPUS) >= 0.9  # issue 20's floor on the serving rows, with issue 21's corpus
    allowed = ("no concurrency", "draft method", "a drafter trained for another target")
    assert all(r.startswith(allowed) for r in reasons if r)


def test_layouts_and_mismatched_drafters_are_stated_as_they_ran() -> None:
    """DP-attention rows (ATOM --tp N --enable-dp-attention) run as N groups of one GPU; a head trained for another
    target (the source's own mismatch test) is priced with its measured acceptance only."""
    dpa = CORPUS[CORPUS["dp_attention"] == True].iloc[0]  # noqa: E712 (a column of bools)
    st = state(dpa, "measured")
    assert st.flags is not None and (st.flags.tp, st.flags.dp) == (1, int(dpa["tp"]))
    odd = CORPUS[CORPUS["draft_model"].astype(str).str.contains("mismatched")].iloc[0]
    assert state(odd, "priors").flags is None and state(odd, "measured").flags is not None


def test_both_arms_are_measured_on_every_row() -> None:
    both = CORPUS[["output_tok_s_off", "output_tok_s_on"]].notna().all(axis=1) | CORPUS[
        ["tpot_mean_ms_off", "tpot_mean_ms_on"]].notna().all(axis=1)
    assert both.all()


def _fake(corpus: pd.DataFrame, tput_scale: float, on_scale: float) -> pd.DataFrame:
    return pd.DataFrame({"id": corpus["id"], "stated": True, "reason": "",
                         "pred_tok_s_off": corpus["output_tok_s_off"] * tput_scale,
                         "pred_tok_s_on": corpus["output_tok_s_on"] * tput_scale * on_scale,
                         "pred_tpot_ms_off": corpus["tpot_mean_ms_off"] / tput_scale,
                         "pred_tpot_ms_on": corpus["tpot_mean_ms_on"] / (tput_scale * on_scale),
                         "pred_acceptance_length": corpus["acceptance_length"]})


def test_scores_of_known_errors() -> None:
    """Predictions 10% fast in both arms leave the ratios exact; 20% more on the spec arm shows in the ratio."""
    part = CORPUS[CORPUS["group"] == "atom-mi355x"]
    s = score(part, {"exact": _fake(part, 1.0, 1.0), "fast": _fake(part, 1.1, 1.0), "spec": _fake(part, 1.0, 1.2)})
    g = s.groups.set_index(["mode", "group"])
    assert g.loc[("exact", "OVERALL"), "ratio_abs"] == pytest.approx(0.0, abs=1e-12)
    assert g.loc[("fast", "OVERALL"), "ratio_abs"] == pytest.approx(0.0, abs=1e-12)
    assert g.loc[("fast", "OVERALL"), "tput_abs"] == pytest.approx(0.1)
    assert g.loc[("fast", "OVERALL"), "tpot_bias"] == pytest.approx(1 / 1.1 - 1)
    assert g.loc[("spec", "OVERALL"), "ratio_bias"] == pytest.approx(0.2)
    assert g.loc[("spec", "OVERALL"), "tpot_ratio_bias"] == pytest.approx(1 / 1.2 - 1)
    assert g.loc[("exact", "OVERALL"), "crossover_hits"] == g.loc[("exact", "OVERALL"), "crossover_n"] > 0


def test_crossover_hit_within_one_sweep_step() -> None:
    def frame(meas: list[float], pred: list[float]) -> pd.DataFrame:
        return pd.DataFrame({"group": "g", "hardware": "h", "concurrency": [4, 8, 16, 32, 64],
                             "meas_ratio": meas, "pred_ratio": pred})

    pays = [2.0, 1.5, 1.2, 1.1, 1.05]
    stops_at_32 = [2.0, 1.5, 1.2, 0.9, 0.8]
    stops_at_16 = [2.0, 1.5, 0.95, 0.9, 0.8]
    stops_at_8 = [2.0, 0.9, 0.8, 0.7, 0.6]
    assert crossover_hits(frame(stops_at_32, stops_at_16))["hit"].item()  # one step early
    assert not crossover_hits(frame(stops_at_32, stops_at_8))["hit"].item()  # two steps early
    assert crossover_hits(frame([*stops_at_32[:4], 1.01], pays))["hit"].item()  # pays at the end: one past it
    assert crossover_hits(frame(pays, pays))["hit"].item()
    assert not crossover_hits(frame(pays, stops_at_16))["hit"].item()


def test_command_on_a_small_corpus(tmp_path: Path) -> None:
    small = CORPUS[CORPUS["group"].isin(["llmbench-vllm-h100", "specter-a40"])]
    path = tmp_path / "serving.csv"
    small.to_csv(path, index=False)
    r = invoke("validate", "--serving", "--corpus", str(path), "-f", "json")
    assert r.code == 0, r.err
    import json

    groups = {(g["mode"], g["group"]): g for g in json.loads(r.out)["groups"]}
    overall = groups[("priors", "OVERALL")]
    assert overall["stated"] == len(small)
    assert math.isfinite(overall["ratio_abs"]) and overall["ratio_abs"] < 0.5
    # the measured absolute throughput of plain decoding on the H100 rows, held out of every fit
    assert groups[("priors", "llmbench-vllm-h100")]["tput_abs"] < 0.15
    # the bands per figure the sources report (both ratios and both arms' tok/s here; no TPOT), inside + above +
    # below = 1, and pooled they give the group table's OVERALL share
    bands = pd.DataFrame(json.loads(r.out)["bands"])
    assert bands.groupby("mode")["figure"].apply(set).tolist() == [
        {"x tok/s (on/off)", "tok/s on", "tok/s off"}] * 2, bands
    assert (bands["inside"] + bands["above"] + bands["below"]).to_numpy() == pytest.approx(1.0)
    for mode, b in bands.groupby("mode"):
        pooled = float((b["inside"] * b["n"]).sum() / b["n"].sum())
        assert pooled == pytest.approx(groups[(mode, "OVERALL")]["band_inside"])
    table = invoke("validate", "--serving", "--corpus", str(path))
    assert table.code == 0 and "80% bands, acceptance from the priors" in table.out and "x tok/s (on/off)" in table.out


def test_bad_corpus_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    CORPUS.drop(columns=["concurrency"]).head(3).to_csv(bad, index=False)
    before = snapshot(tmp_path)
    r = invoke("validate", "--serving", "--corpus", str(bad), cwd=tmp_path)
    assert_clean_failure(r, ("concurrency",), before, snapshot(tmp_path), "missing column")
    r = invoke("validate", "--serving", "--modules", cwd=tmp_path)
    assert_clean_failure(r, ("--serving",), before, snapshot(tmp_path), "two modes")

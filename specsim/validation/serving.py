"""`specsim validate --serving`: the serving simulator against published serving measurements, speculation off and
on (specsim/validation/data/serving.csv, each row naming its source; SERVING_SOURCES.md).

Each row is one deployment at one load point. It is stated to the tool as the benchmark client ran it
(`advise.benchmark`: the hardware, model, precision, engine, draft and k; closed-loop clients at the row's
concurrency sending its number of prompts of its lengths and range ratio), simulated with speculation off and
on, and compared, per source group:
- the spec-on / spec-off ratio of output throughput and of mean TPOT at each load point (the answer: does it
  pay, by how much);
- absolute output throughput and mean TPOT of each arm;
- the crossover concurrency of each deployment swept over several points (`simulate.frontier.crossover`): hit
  when the predicted one is within one sweep step of the measured one (both None counts as a hit).
Twice: with the source's measured acceptance length where it gives one (rows without are left out of that
mode), and with the acceptance priors (every stated row; the task from the row's prompts). Nothing here is
fitted: every figure is held out of every fit in the project.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specsim.errors import SpecsimError
from specsim.simulate.frontier import crossover

MODES = ("measured", "priors")
NEEDED = ("id", "group", "source", "hardware", "tp", "engine", "model", "weight_dtype", "kv_dtype", "draft", "k",
          "client", "concurrency", "input_len", "output_len", "range_ratio", "num_prompts", "prompts",
          "output_tok_s_off", "output_tok_s_on", "tpot_mean_ms_off", "tpot_mean_ms_on", "acceptance_length")
#: prompts of random tokens (with or without the chat template) are priced with the chat prior (module docstring)
RANDOM_TASK = "chat"
#: Prompt tokens where a source does not state them (an assumption each row's output names): GSM8K test questions
#: sent as raw text are a few sentences (the first, "Janet's ducks lay 16 eggs per day...", is 61 words, about 80
#: tokens): 100; any other unstated prompt set (a fixed chat prompt, a benchmark's questions): a short chat prompt,
#: 128. Both estimates; the measured rows bear them out (their throughput is concurrency / TPOT within a few
#: percent, so prefill is a small share).
UNSTATED_INPUT_TOKENS = {"dataset:gsm8k": 100}
DEFAULT_UNSTATED_INPUT_TOKENS = 128


def assumed_input_len(prompts: object) -> int:
    return UNSTATED_INPUT_TOKENS.get(str(prompts), DEFAULT_UNSTATED_INPUT_TOKENS)


def corpus_path() -> Path:
    return Path(str(resources.files("specsim.validation"))) / "data" / "serving.csv"


NUMERIC = ("tp", "k", "concurrency", "input_len", "output_len", "range_ratio", "num_prompts", "output_tok_s_off",
           "output_tok_s_on", "tpot_mean_ms_off", "tpot_mean_ms_on", "acceptance_length")


def load_corpus(path: Path | None = None) -> pd.DataFrame:
    """The serving corpus (or a CSV in its columns); one line naming what is wrong."""
    from specsim.validation.corpus import read_table

    return read_table(path or corpus_path(), NEEDED, NUMERIC)


def task_of_prompts(prompts: object) -> str:
    """The acceptance prior's task for a row's prompts (`advise.benchmark.prompts_task`: random tokens take the
    chat prior, a dataset its task); a prompt set the priors do not know takes the chat prior too."""
    from specsim.advise.benchmark import prompts_task

    try:
        return prompts_task(str(prompts or "random"))[0] or RANDOM_TASK
    except SpecsimError:
        return RANDOM_TASK


def _num(row: pd.Series, key: str) -> float | None:
    v: Any = row.get(key)
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


@dataclass(frozen=True)
class Stated:
    """A row stated to the tool, or why it cannot be."""

    row_id: str
    flags: Any | None  # advise.benchmark.BenchmarkFlags
    num_prompts: int | None
    reason: str = ""


def state(row: pd.Series, mode: str) -> Stated:
    """The benchmark flags a row ran with (module docstring), or the reason it cannot be stated."""
    from specsim.advise.benchmark import BenchmarkFlags
    from specsim.drafts.registry import METHODS

    rid = str(row["id"])
    # DP attention as SGLang and ATOM run it (--tp N --enable-dp-attention): N groups of one GPU each
    dp_attention = str(row.get("dp_attention", "")).strip().lower() in ("true", "1", "yes")
    tp = int(row["tp"])
    if str(row["draft"]) not in METHODS:
        return Stated(rid, None, None, f"draft method '{row['draft']}' is not modelled")
    c, k = _num(row, "concurrency"), _num(row, "k")
    if k is None and _num(row, "num_draft_tokens") is not None and (_num(row, "topk") or 1) == 1:
        k = (_num(row, "num_draft_tokens") or 1) - 1  # SGLang's chain: the draft tokens count the root
    if c is None or k is None:
        return Stated(rid, None, None, "no concurrency" if c is None else "no draft length k")
    length = _num(row, "acceptance_length")
    if mode == "priors" and "mismatched" in str(row.get("draft_model", "")):
        # the source's own test of a head trained for another target: no prior describes it (measured mode does)
        return Stated(rid, None, None, "a drafter trained for another target: no prior describes it")
    if mode == "measured" and length is None:
        return Stated(rid, None, None, "the source gives no acceptance length")
    if mode == "measured" and str(row["engine"]) == "vllm" and str(row["draft"]) == "ngram":
        # vLLM's mean acceptance length is 1 + accepted / num_drafts, num_drafts counting only the request-steps
        # that had an n-gram match (v1/spec_decode/metrics.py, core/sched/scheduler.py at v0.28.0): not tokens
        # per step unless the share of steps with a draft is known
        return Stated(rid, None, None, "vLLM's n-gram acceptance length counts only steps with a draft")
    flags = BenchmarkFlags(
        hardware=str(row["hardware"]), model=str(row["model"]), drafts=(str(row["draft"]),),
        tp=1 if dp_attention else tp, dp=tp if dp_attention else 1, ep=int(_num(row, "ep") or 1),
        engine=str(row["engine"]), weight_dtype=str(row["weight_dtype"]),
        kv_dtype=str(row["kv_dtype"]) if isinstance(row["kv_dtype"], str) else "bf16",  # unstated: the engines' auto
        k=int(k), input_len=int(_num(row, "input_len") or assumed_input_len(row.get("prompts"))),
        output_len=int(_num(row, "output_len") or 1024),
        range_ratio=_num(row, "range_ratio"),
        client=str(row["client"]) if str(row["client"]) in ("vllm", "sglang", "atom") else None,
        task=task_of_prompts(row.get("prompts")),
        acceptance_length=min(length, k + 1.0) if mode == "measured" and length is not None else None,
        max_num_seqs=int(_num(row, "max_num_seqs") or 0) or None, concurrency=(int(c),))
    prompts = _num(row, "num_prompts")
    return Stated(rid, flags, int(prompts) if prompts else None)


def _short(message: str) -> str:
    """A mapping error in a few words (an unknown model's message lists the whole catalogue)."""
    text = message.removeprefix("command line: ")
    return text.split(" (known:")[0].split("; known")[0][:120]


def predict(corpus: pd.DataFrame, mode: str) -> pd.DataFrame:
    """One row per corpus row: the predicted output throughput and mean TPOT of both arms and the acceptance
    length simulated, or the reason it was not stated. All rows' simulations run as one batch (forked workers)."""
    from specsim.advise.benchmark import benchmark_scenario
    from specsim.advise.simulation import make_setup, sweep_cases
    from specsim.simulate.client import client_columns
    from specsim.simulate.frontier import configuration
    from specsim.simulate.sweep import SweepBatch
    from specsim.step.policy import Policy

    if mode not in MODES:
        raise SpecsimError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    sweeps, meta, out = [], [], []
    for _, row in corpus.iterrows():
        st = state(row, mode)
        if st.flags is None:
            out.append({"id": st.row_id, "stated": False, "reason": st.reason})
            continue
        try:
            setup = make_setup(benchmark_scenario(st.flags), policy=Policy.static(st.flags.k))
            cases, costs = sweep_cases(setup, None, None, None, [st.flags.concurrency[0]], st.num_prompts)
        except SpecsimError as exc:
            out.append({"id": st.row_id, "stated": False, "reason": _short(str(exc))})
            continue
        sweeps.append((cases, costs))
        meta.append((len(out), setup))
        out.append({"id": st.row_id, "stated": True, "reason": "", "engine_profile": setup.target.engine.name})
    frames = SweepBatch(sweeps).frames() if sweeps else []
    for (at, setup), frame in zip(meta, frames, strict=True):
        cols = client_columns(frame, setup.gpus_per_replica, "vllm")
        labels = [configuration(d, p) for d, p in zip(frame["draft"], frame["policy"], strict=True)]
        off = cols[[lab == "off" for lab in labels]].iloc[0]
        on = cols[[lab != "off" for lab in labels]].iloc[0]
        tau = float(on["acceptance_length"])
        low, high = setup.draft.tau_band(setup.policy.k, tau, exact=False) if setup.draft.speculates \
            else (tau, tau)
        out[at].update({"pred_tok_s_off": off["output_tok_s"], "pred_tok_s_on": on["output_tok_s"],
                        "pred_tpot_ms_off": off["tpot_mean_ms"], "pred_tpot_ms_on": on["tpot_mean_ms"],
                        "pred_acceptance_length": tau, "pred_tau_low": low, "pred_tau_high": high})
    return pd.DataFrame(out)


#: each serving figure: the measured column it is judged on, how it moves with acceptance (at a fixed concurrency
#: the step barely does: output throughput as tokens per step, TPOT as its inverse) and which cost spread it carries
SERVING_BANDS = {"pred_ratio": ("meas_ratio", 1, "speedup"), "pred_tpot_ratio": ("meas_tpot_ratio", -1, "speedup"),
                 "pred_tok_s_on": ("output_tok_s_on", 1, "step"), "pred_tok_s_off": ("output_tok_s_off", 0, "step"),
                 "pred_tpot_ms_on": ("tpot_mean_ms_on", -1, "step"), "pred_tpot_ms_off": ("tpot_mean_ms_off", 0,
                                                                                         "step")}


def add_bands(j: pd.DataFrame) -> pd.DataFrame:
    """Each predicted serving figure's 80% band (`<figure>_low`, `_high`): the acceptance's band (none with the
    source's acceptance given) and the engine's cost spread fitted on the published speedups (the serving rows are
    held out of it), combined as step/bands.py combines them."""
    from specsim.step.bands import step_bands

    out = j.copy()
    ok = out["stated"] == True  # noqa: E712
    for name in SERVING_BANDS:
        out[f"{name}_low"] = out[f"{name}_high"] = float("nan")
    banded = {name: (sign, cost) for name, (_, sign, cost) in SERVING_BANDS.items()}
    for engine, g in out[ok].groupby("engine_profile"):
        central = {"tokens_per_step": g["pred_acceptance_length"].to_numpy(float),
                   **{name: g[name].to_numpy(float) for name in SERVING_BANDS}}
        b = step_bands(central, g["pred_tau_low"].to_numpy(float), g["pred_tau_high"].to_numpy(float), str(engine),
                       banded=banded)
        for name in SERVING_BANDS:
            out.loc[g.index, f"{name}_low"], out.loc[g.index, f"{name}_high"] = b.low[name], b.high[name]
    return out


def _band_share(s: pd.DataFrame) -> tuple[float, float, int]:
    """The share of the stated rows' measured figures inside their bands (every banded figure pooled), their
    median relative half-width, and how many were judged."""
    from specsim.validation.spread import coverage

    inside, half, n = [], [], 0
    for name, (meas, _, _) in SERVING_BANDS.items():
        c = coverage(*(s[col].to_numpy(float) for col in (meas, name, f"{name}_low", f"{name}_high")))
        if c.n:
            inside.append(c.inside * c.n)
            half.append(c.half_width)
            n += c.n
    return (sum(inside) / n, float(np.median(half)), n) if n else (math.nan, math.nan, 0)


#: how each banded figure is named where it is reported
FIGURE_NAMES = {"pred_ratio": "x tok/s (on/off)", "pred_tpot_ratio": "x TPOT (on/off)", "pred_tok_s_on": "tok/s on",
                "pred_tok_s_off": "tok/s off", "pred_tpot_ms_on": "TPOT on", "pred_tpot_ms_off": "TPOT off"}


def band_by_figure(s: ServingScore) -> pd.DataFrame:
    """Per mode and serving figure: how often the measured value fell inside its 80% band, above and below it,
    and the band's median relative half-width (the stated rows)."""
    from specsim.validation.spread import coverage

    out = []
    for mode, rows in s.rows.groupby("mode", sort=False):
        stated = rows[rows["stated"] == True]  # noqa: E712
        for name, (meas, _, _) in SERVING_BANDS.items():
            if f"{name}_low" not in stated:
                continue
            c = coverage(*(stated[col].to_numpy(float) for col in (meas, name, f"{name}_low", f"{name}_high")))
            if c.n == 0:  # the source does not report this figure
                continue
            out.append({"mode": mode, "figure": FIGURE_NAMES[name], "n": c.n, "inside": c.inside, "above": c.above,
                        "below": c.below, "half_width": c.half_width})
    return pd.DataFrame(out, columns=["mode", "figure", "n", "inside", "above", "below", "half_width"])


def _err(pred: pd.Series, meas: pd.Series) -> pd.Series:
    ok = pred.notna() & meas.notna() & (meas > 0)
    return (pred[ok] / meas[ok] - 1.0).astype(float)


def _summary(e: pd.Series) -> tuple[float, float]:
    return (float(e.abs().median()), float(e.median())) if len(e) else (math.nan, math.nan)


def _deployment(frame: pd.DataFrame) -> pd.Series:
    """A key per deployment: every stated field but the load point and the figures."""
    keys = [c for c in ("group", "hardware", "tp", "ep", "dp_attention", "engine", "engine_version", "model",
                        "weight_dtype", "kv_dtype", "draft", "k", "input_len", "output_len", "range_ratio")
            if c in frame.columns]
    return frame[keys].apply(lambda col: col.map(str)).agg("|".join, axis=1)


def crossover_hits(joined: pd.DataFrame) -> pd.DataFrame:
    """Per deployment swept over 3 or more concurrencies: measured and predicted crossover, and whether the
    prediction is within one sweep step of the measurement."""
    rows = []
    for key, g in joined.groupby(_deployment(joined), sort=False):
        g = g.dropna(subset=["meas_ratio", "pred_ratio"]).sort_values("concurrency")
        if len(g) < 3:
            continue
        x = g["concurrency"].to_numpy(float)
        meas = crossover(x, g["meas_ratio"].to_numpy(float))
        pred = crossover(x, g["pred_ratio"].to_numpy(float))
        idx = {v: i for i, v in enumerate(x.tolist())}
        top = len(x)  # 'still pays at the largest point' sits one step past the sweep
        mi, pi = (top if meas is None else idx[meas]), (top if pred is None else idx[pred])
        rows.append({"group": g["group"].iloc[0], "deployment": str(key), "points": len(g), "measured": meas,
                     "predicted": pred, "hit": abs(mi - pi) <= 1})
    return pd.DataFrame(rows, columns=["group", "deployment", "points", "measured", "predicted", "hit"])


@dataclass(frozen=True, eq=False)
class ServingScore:
    """Per row (joined with its predictions), per group and mode, and the crossovers."""

    rows: pd.DataFrame
    groups: pd.DataFrame
    crossovers: pd.DataFrame


def score(corpus: pd.DataFrame, predictions: dict[str, pd.DataFrame]) -> ServingScore:
    """The errors of each mode's predictions, per source group and overall (module docstring)."""
    parts, groups, cross = [], [], []
    for mode, pred in predictions.items():
        j = corpus.merge(pred, on="id", how="left")
        j["mode"] = mode
        j["meas_ratio"] = j["output_tok_s_on"] / j["output_tok_s_off"]
        j["pred_ratio"] = j["pred_tok_s_on"] / j["pred_tok_s_off"]
        j["meas_tpot_ratio"] = j["tpot_mean_ms_on"] / j["tpot_mean_ms_off"]
        j["pred_tpot_ratio"] = j["pred_tpot_ms_on"] / j["pred_tpot_ms_off"]
        j = add_bands(j) if "pred_tau_low" in j else j
        parts.append(j)
        c = crossover_hits(j[j["stated"] == True])  # noqa: E712 (a column of booleans and NaN)
        c["mode"] = mode
        cross.append(c)
        for name, g in [*j.groupby("group", sort=True), ("OVERALL", j)]:
            s = g[g["stated"] == True]  # noqa: E712
            tput = pd.concat([_err(s["pred_tok_s_off"], s["output_tok_s_off"]),
                              _err(s["pred_tok_s_on"], s["output_tok_s_on"])])
            tpot = pd.concat([_err(s["pred_tpot_ms_off"], s["tpot_mean_ms_off"]),
                              _err(s["pred_tpot_ms_on"], s["tpot_mean_ms_on"])])
            ratio, tratio = _err(s["pred_ratio"], s["meas_ratio"]), _err(s["pred_tpot_ratio"], s["meas_tpot_ratio"])
            cg = c if name == "OVERALL" else c[c["group"] == name]
            groups.append({
                "mode": mode, "group": name, "rows": len(g), "stated": len(s),
                "ratio_n": len(ratio), "ratio_abs": _summary(ratio)[0], "ratio_bias": _summary(ratio)[1],
                "tpot_ratio_n": len(tratio), "tpot_ratio_abs": _summary(tratio)[0],
                "tpot_ratio_bias": _summary(tratio)[1],
                "tput_abs": _summary(tput)[0], "tput_bias": _summary(tput)[1],
                "tpot_abs": _summary(tpot)[0], "tpot_bias": _summary(tpot)[1],
                "crossover_hits": int(cg["hit"].sum()) if len(cg) else 0, "crossover_n": len(cg),
                **dict(zip(("band_inside", "band_half_width", "band_n"),
                           _band_share(s) if "pred_ratio_low" in s else (math.nan, math.nan, 0), strict=True))})
    return ServingScore(pd.concat(parts, ignore_index=True), pd.DataFrame(groups),
                        pd.concat(cross, ignore_index=True) if cross else pd.DataFrame())


def validate_serving(path: Path | None = None) -> ServingScore:
    """Every row of the corpus (or a CSV in its columns) predicted in both modes and scored."""
    corpus = load_corpus(path)
    return score(corpus, {mode: predict(corpus, mode) for mode in MODES})


def reasons(s: ServingScore) -> pd.Series:
    """How many rows each reason left unstated (priors mode: every row the tool could state)."""
    r = s.rows[(s.rows["mode"] == "priors") & (s.rows["stated"] != True)]  # noqa: E712
    return r["reason"].value_counts() if len(r) else pd.Series(dtype=int)


"""Many `evaluate` questions at once: one row per question, its columns named as evaluate's options.

A row is read by the same fields (`specsim.fields`) and checked by the same `advise.request.evaluate_request` as
the flags, so a column is refused, defaulted or priced exactly as its flag is; its answer has the keys evaluate's
JSON has (`advise.answer.ANSWER`), then `error`. A blank cell is a flag not given.

Speed: rows that share everything but the per-row axes (k, batch, context, alpha, acceptance_length) are one
setup, checked once and priced by one `step.evaluate.step_arrays` call, so 10,000 questions cost a few numpy
calls. A setup whose question only the scalar route prices (a tree file, per-position rates, a metrics file,
adaptive drafting, the abstract cost model) is priced row by row through `evaluate_step` itself. A row that
cannot be answered gets its reason in `error` and blank figures; one that does not fit in memory is reported as
such, never as a speedup.

`evaluate_grid` also takes two columns of the validation's own (INTERNAL), which the CLI's grid refuses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specsim.acceptance.chain import AcceptanceProfile
from specsim.advise.answer import ANSWER, TEXT, record
from specsim.advise.evaluate import (
    EvaluateRequest,
    RealCost,
    cost_label,
    evaluate_step,
    target_and_draft,
)
from specsim.advise.request import evaluate_request
from specsim.drafts.draft import Draft
from specsim.engines.profile import EngineProfile
from specsim.errors import SpecsimError
from specsim.fields import FIELDS, Given, fields_of, spelling, unknown_names
from specsim.step.bands import step_bands
from specsim.step.evaluate import Target, memory_per_gpu, step_arrays

#: validation's columns: keep a research loop's memory unchecked; leave the context unchecked against the model's
#: window (a published run ran a long-context variant of the architecture: TriForce's Yarn-extended Llama-2 128k);
#: hold a source's priors out
INTERNAL = {"check_memory": True, "check_context": True, "prior_held_out_source": None}
#: the per-row axes of a setup (module docstring), and a valid value of each that stands in for the row's own
#: while the setup is checked (each row's own value is checked on its own)
AXES = ("k", "batch", "context", "alpha", "acceptance_length")
_PLACEHOLDER = {"k": 1, "batch": 1, "context": 0, "alpha": 0.5, "acceptance_length": 1.0}
OUTPUTS = (*ANSWER, "error")
COLUMNS = spelling("evaluate")


def check_columns(columns: list[str], where: str) -> None:
    """A grid's columns must be evaluate's fields (old spellings included): an answer's column or an unknown
    one is refused, naming the nearest field."""
    answer = [c for c in columns if c in OUTPUTS]
    if answer:
        raise SpecsimError(f"{where}: column {answer[0]!r} is an answer, not a question (drop the answer columns)")
    bad = unknown_names([str(c) for c in columns], COLUMNS, "column", "specsim evaluate --help")
    if bad is not None:
        raise SpecsimError(f"{where}: {bad}")
    dup = [c for c in set(map(COLUMNS.get, columns)) if list(map(COLUMNS.get, columns)).count(c) > 1]
    if dup:
        raise SpecsimError(f"{where}: column {dup[0]!r} is given twice (under its name and an old one)")


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value)) or (
        isinstance(value, str) and not value.strip())


def row_given(row: Mapping[Any, Any]) -> Given:
    """A row's question: each non-blank cell parsed by its field (SpecsimError naming the column)."""
    values: dict[str, Any] = {}
    typed = set()
    for f in fields_of("evaluate"):
        cell = row.get(f.name)
        if _blank(cell):
            values[f.name] = f.default
        else:
            values[f.name] = f.parse(cell, f"column {f.name!r}")
            typed.add(f.name)
    from specsim.scenario.deployment import fill

    return fill(Given(values, frozenset(typed), "column"), "evaluate")


def _vectorised(req: EvaluateRequest) -> bool:
    """Whether the setup is priced by one step_arrays call (module docstring)."""
    a = req.acceptance
    return (isinstance(req.cost, RealCost) and req.tree is None and req.sibling_probs is None and a.alphas is None
            and a.file is None and req.adaptive is None and req.overhead_ms == 0 and req.cost.calibration is None)


def _axis(df: pd.DataFrame, name: str, error: np.ndarray) -> np.ndarray:
    """A per-row axis as floats (NaN where blank), each distinct cell parsed by its field; a bad cell's reason
    goes to `error`."""
    f = FIELDS[name]
    out = np.full(len(df), np.nan)
    if name not in df.columns:
        return out
    cells = df[name]
    for cell in cells.dropna().unique():
        rows = (cells == cell).to_numpy()
        if _blank(cell):
            continue
        try:
            out[rows] = float(f.parse(cell, f"column {name!r}"))
        except SpecsimError as exc:
            error[rows & (error == "")] = str(exc)
    return out


def _tokens_per_step(d: Draft, k: np.ndarray, q: np.ndarray, alpha: np.ndarray, tau: np.ndarray,
                     error: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tokens per step, acceptance source, the acceptance's (low, high) tokens per step) per row: the measured
    length, else alpha, else the prior (whose band it is; the others have none: low = high = central)."""
    tps = np.full(k.shape, np.nan)
    band = np.full((2, *k.shape), np.nan)
    source = np.full(k.shape, "", dtype=object)
    plain = (k == 0) | (not d.speculates)
    tps[plain] = 1.0
    source[plain] = "none (plain decoding)"
    given = ~plain & np.isfinite(tau)
    bad = given & ~(tau <= q + 1e-9)
    error[bad & (error == "")] = [f"acceptance_length {x:g} is outside [1, {v:g}] (tokens per step incl. the "
                                  "bonus token)" for x, v in zip(tau[bad & (error == "")], q[bad & (error == "")],
                                                                 strict=True)]
    tps[given & ~bad] = tau[given & ~bad]
    source[given] = "measured acceptance length"
    use_alpha = ~plain & ~given & np.isfinite(alpha)
    for a, kk in {(float(a), int(kk)) for a, kk in zip(alpha[use_alpha], k[use_alpha], strict=True)}:
        rows = use_alpha & (alpha == a) & (k == kk)
        tps[rows] = dataclasses.replace(d, acceptance=AcceptanceProfile.from_alpha(a)).tokens_per_step(kk)
        source[rows] = f"alpha={a:g}"
    prior = ~plain & ~given & ~use_alpha
    known = d.acceptance.max_k
    for kk in np.unique(k[prior]).astype(int):
        rows = prior & (k == kk)
        if known is not None and kk > known:
            error[rows & (error == "")] = f"k = {kk} exceeds the {known} positions the acceptance profile knows"
            continue
        central = float(d.tokens_per_step(kk))
        tps[rows] = central
        source[rows] = d.acceptance.source
        band[:, rows] = np.array(d.tau_band(int(kk), central))[:, None]
    band = np.where(np.isnan(band), tps, band)
    return tps, source, band


def _shapes(d: Draft, k: np.ndarray) -> np.ndarray:
    """priced_draft per row, as evaluate spells it."""
    if not d.speculates:
        return np.full(k.shape, f"{d.label}: none (plain decoding)", dtype=object)
    if d.is_tree:
        return np.full(k.shape, f"{d.label}: tree topk {d.topk} x {d.num_draft_tokens} nodes", dtype=object)
    return np.array([f"{d.label}: chain k={int(x)}" for x in k], dtype=object)


def _price_setup(df: pd.DataFrame, t: Target, d: Draft, cost: RealCost, checks: tuple[bool, bool],
                 error: np.ndarray) -> dict[str, np.ndarray]:
    """The answer columns of a vectorised setup's rows (NaN / '' where `error` says why not)."""
    n = len(df)
    check_memory, check_context = checks
    k, batch, ctx, alpha, tau = (_axis(df, name, error) for name in AXES)
    k = np.where(np.isnan(k), 0.0 if not d.speculates else np.nan, k)
    error[np.isnan(k) & (error == "")] = "give the draft length --k K (or a --tree FILE)"
    batch = np.where(np.isnan(batch), float(FIELDS["batch"].default), batch)
    ctx = np.where(np.isnan(ctx), float(FIELDS["context"].default), ctx)
    ok = error == ""
    k, batch, ctx = (np.where(ok, a, 1.0) for a in (k, batch, ctx))
    q = np.where(k > 0, np.asarray(d.verify_tokens_per_seq(k), dtype=float), 1.0) if d.speculates else np.ones(n)
    tps, source, band = _tokens_per_step(d, k, q, alpha, tau, error)
    m = step_arrays(t, d, k, batch, ctx, np.where(np.isfinite(tps), tps, 1.0))
    out: dict[str, np.ndarray] = {name: np.broadcast_to(np.asarray(v, float), (n,)).copy()
                                  for name, v in m.as_dict().items()}
    out["tokens_per_step"] = tps
    out.update(step_bands(out, band[0], band[1], t.engine.name).as_dict())
    mem_gib, cap_gib = np.full(n, np.nan), np.full(n, np.nan)
    for kk in np.unique(k).astype(int):
        rows = k == kk
        mem = memory_per_gpu(t, d, kk, batch[rows], ctx[rows])
        mem_gib[rows], cap_gib[rows] = mem.total / 2**30, mem.capacity / 2**30
    label, share = cost_label(t, batch, q, ctx)
    window = t.model.max_context_tokens
    too_long = (error == "") & (ctx > window) & check_context & (window > 0)
    error[too_long] = [f"{t.model.name}: context {c:,.0f} tokens exceeds its {window:,}-token window"
                       for c in ctx[too_long]]
    no_fit = (error == "") & (mem_gib > cap_gib) & check_memory
    error[no_fit] = [f"does not fit: {a:.1f} GiB per GPU needed of {c:.1f} GiB" for a, c in
                     zip(mem_gib[no_fit], cap_gib[no_fit], strict=True)]
    out.update(memory_gib_per_gpu=mem_gib, memory_capacity_gib=cap_gib, verify_tokens_per_seq=q,
               expected_k=np.full(n, np.nan), gpus=np.full(n, float(t.gpus)), acceptance_source=source,
               priced_hardware=np.full(n, t.hardware.name, dtype=object),
               priced_model=np.full(n, t.model.name, dtype=object),
               priced_kv_dtype=np.full(n, t.kv_dtype, dtype=object),
               priced_weights=np.full(n, t.model.precision_label(cost.weight_dtype), dtype=object),
               priced_layout=np.full(n, str(t.layout or f"tp {t.tp}"), dtype=object),
               priced_engine=np.full(n, t.engine.name, dtype=object),
               priced_cost_model=np.full(n, label, dtype=object), table_share=share, priced_draft=_shapes(d, k))
    return out


def _scalar(df: pd.DataFrame, base: Path | None, error: np.ndarray) -> dict[str, np.ndarray]:
    """The answer columns of rows priced one by one through evaluate itself."""
    out: dict[str, np.ndarray] = {key: np.full(len(df), None if key in TEXT else np.nan, dtype=object if key in TEXT
                                               else float) for key in ANSWER}
    for i, (_, row) in enumerate(df.iterrows()):
        try:
            rec = record(evaluate_step(evaluate_request(row_given(row.to_dict()), base)))
        except SpecsimError as exc:
            error[i] = str(exc)
            continue
        for key, value in rec.items():
            out[key][i] = (np.nan if key not in TEXT else None) if value is None else value
    return out


def _setup_answers(df: pd.DataFrame, base: Path | None, engines: Mapping[str, EngineProfile] | None,
                   ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The answer columns of one setup's rows, and their errors."""
    error = np.full(len(df), "", dtype=object)
    first = df.iloc[0]
    stand_in = {key: _PLACEHOLDER[key] for key in AXES if key in first.index and not _blank(first[key])}
    req = evaluate_request(row_given({**{str(c): v for c, v in first.items()}, **stand_in}), base)
    if not _vectorised(req):
        return _scalar(df, base, error), error
    assert isinstance(req.cost, RealCost)
    held = first.get("prior_held_out_source", INTERNAL["prior_held_out_source"])
    t, d = target_and_draft(req.cost, None, None if _blank(held) else str(held), engines)
    checks = tuple(bool(True if _blank(first.get(c)) else first.get(c)) for c in ("check_memory", "check_context"))
    return _price_setup(df, t, d, req.cost, (checks[0], checks[1]), error), error


def evaluate_grid(frame: pd.DataFrame, engines: Mapping[str, EngineProfile] | None = None,
                  base: Path | None = None) -> pd.DataFrame:
    """`frame` with OUTPUTS appended (module docstring), row order and its other columns kept; relative paths
    in cells are read from `base`; `engines` replaces bundled engine profiles by name."""
    result = frame.reset_index(drop=True).copy()
    df = result.rename(columns={c: COLUMNS[c] for c in result.columns if c in COLUMNS})
    n = len(df)
    out: dict[str, np.ndarray] = {key: np.full(n, None if key in TEXT else np.nan, dtype=object if key in TEXT
                                               else float) for key in ANSWER}
    error = np.full(n, "", dtype=object)
    setup = [c for c in df.columns if c in FIELDS and c not in (*AXES, "label")]
    setup += [c for c in INTERNAL if c in df.columns]
    presence = [df[c].map(_blank).rename(f"{c} blank") for c in AXES if c in df.columns]
    keys = [df[c].astype(str) for c in setup] + presence
    groups = df.groupby(keys, sort=False, dropna=False) if keys else [(None, df)]
    for _, group in groups:
        idx = group.index.to_numpy()
        try:
            answers, errors = _setup_answers(group, base, engines)
        except SpecsimError as exc:
            error[idx] = str(exc)
            continue
        good = errors == ""
        for key, values in answers.items():
            blank: Any = None if key in TEXT else np.nan
            out[key][idx] = np.where(good, values, blank)
        error[idx] = errors
    for key in ANSWER:
        result[key] = out[key]
    result["error"] = error
    return result

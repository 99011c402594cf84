"""Many configurations at once: one row per question, vectorised per setup.

`evaluate_grid` takes a table whose columns are named as `specsim evaluate`'s flags (hardware, model,
tp, engine, draft, k, topk, num_draft_tokens, draft_tp, batch, context, weight_dtype, kv_dtype,
alpha, acceptance_length, cost_model, and task / temperature / checkpoint for the acceptance prior
(prior_held_out_source: a source whose prior entries are left out, for validation); blank =
default; other columns carried through) and adds the step
economics of every row. Rows sharing a setup (everything but k, batch, context and acceptance) go
through one `plan.evaluate.step_arrays` call, so 10,000 questions cost a few numpy calls. A row that
cannot be evaluated gets its reason in `error` and blank outputs; a configuration that does not fit
in memory is reported as such, never as a speedup.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from specsim.acceptance.chain import AcceptanceProfile
from specsim.cost.hardware import load_hardware
from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.layout import check_layout, make_layout
from specsim.cost.model import ModelSpec, load_model
from specsim.drafts.build import make_draft
from specsim.drafts.draft import Draft
from specsim.engines.profile import EngineProfile
from specsim.errors import SpecsimError
from specsim.step.evaluate import DEFAULT_ENGINE, Target, bundled_engine, memory_per_gpu, step_arrays

#: Input columns and their defaults (None: required for speculative rows / optional).
INPUTS: dict[str, Any] = {
    "hardware": None, "model": None, "tp": 1, "engine": "", "draft": "none", "k": None, "topk": 1,
    "num_draft_tokens": None, "draft_tp": None, "batch": 1, "context": 1024, "weight_dtype": "bf16",
    "kv_dtype": "bf16", "alpha": None, "acceptance_length": None, "window": None, "guesses": None,
    "check_memory": True, "task": None, "temperature": None, "checkpoint": None, "cost_model": None,
    "prior_held_out_source": None, "dp": 1, "ep": 1, "pp": 1, "cp": 1, "layer_split": False,
}
#: Columns `evaluate_grid` adds.
OUTPUTS = ("tokens_per_step", "step_ms", "draft_ms", "verify_ms", "baseline_step_ms", "speedup", "throughput_tok_s",
           "ms_per_token", "memory_gib", "memory_capacity_gib", "acceptance_source", "error")
SETUP = ("hardware", "model", "tp", "engine", "draft", "topk", "num_draft_tokens", "draft_tp", "weight_dtype",
         "kv_dtype", "window", "guesses", "check_memory", "task", "temperature", "checkpoint", "cost_model",
         "prior_held_out_source", "dp", "ep", "pp", "cp", "layer_split")
ALIASES = {"dtype": "weight_dtype", "acceptance-length": "acceptance_length", "tau": "acceptance_length",
           "cost-model": "cost_model"}


@lru_cache(maxsize=64)
def _hardware(name: str) -> HardwareProfile:
    return load_hardware(name)


@lru_cache(maxsize=256)
def _model(name: str) -> ModelSpec:
    return load_model(name)


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value)) or (isinstance(value, str)
                                                                                and not value.strip())


def normalise(frame: pd.DataFrame) -> pd.DataFrame:
    """Input columns under their canonical names, blanks filled with defaults (a copy)."""
    df = frame.rename(columns={k: v for k, v in ALIASES.items() if k in frame.columns and v not in frame.columns})
    df = df.copy()
    for col, default in INPUTS.items():
        if col not in df.columns:
            df[col] = default
        elif default is not None:
            df[col] = df[col].where(~df[col].map(_blank), default)
    return df


def _setup(row: pd.Series, engines: Mapping[str, EngineProfile] | None = None) -> tuple[Target, Draft]:
    """The Target and Draft of a setup row (SpecsimError when a name or value is wrong); `engines`
    overrides bundled engine profiles by name (the engine fit tries parameter values this way)."""
    hw = _hardware(str(row["hardware"]).strip())
    if not _blank(row["cost_model"]):
        hw = hw.with_cost_model(str(row["cost_model"]).strip().lower())
    model = _model(str(row["model"]).strip())
    tp = _int(row["tp"], "tp", 1)
    name = str(row["engine"]).strip().lower() or DEFAULT_ENGINE
    e = engines[name] if engines and name in engines else bundled_engine(name)
    dp, ep, pp, cp = (_int(row[key], key, 1) for key in ("dp", "ep", "pp", "cp"))
    layout = make_layout(tp, dp, ep, pp, cp, layer_split=not _blank(row["layer_split"]) and _flag(row["layer_split"]),
                         flag="")
    check_layout(layout, model.n_experts, "")
    t = Target(hw, model, tp, str(row["weight_dtype"]), str(row["kv_dtype"]), engine=e, layout=layout)
    spec: dict[str, Any] = {"method": str(row["draft"]).strip()}
    for key in ("topk", "num_draft_tokens", "draft_tp", "window", "guesses"):
        if not _blank(row[key]):
            spec[key] = _int(row[key], key, 1)
    if not _blank(row["checkpoint"]):
        spec["checkpoint"] = str(row["checkpoint"]).strip()
    task = None if _blank(row["task"]) else str(row["task"]).strip()
    temperature = None if _blank(row["temperature"]) else _float(row["temperature"], "temperature")
    held_out = None if _blank(row["prior_held_out_source"]) else str(row["prior_held_out_source"])
    return t, make_draft(spec, model, "draft", task=task, temperature=temperature, held_out_source=held_out)


def _float(value: Any, name: str) -> float:
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise SpecsimError(f"{name} must be a number >= 0, got {value!r}") from None
    if not (np.isfinite(f) and f >= 0):
        raise SpecsimError(f"{name} must be a number >= 0, got {value!r}")
    return f


def _int(value: Any, name: str, lo: int) -> int:
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise SpecsimError(f"{name} must be an integer >= {lo}, got {value!r}") from None
    if not np.isfinite(f) or f != round(f) or f < lo:
        raise SpecsimError(f"{name} must be an integer >= {lo}, got {value!r}")
    return int(f)


def _flag(value: Any) -> bool:
    """A yes/no cell: true unless it reads false / no / 0."""
    return str(value).strip().lower() not in ("false", "no", "0", "0.0")


def _numbers(df: pd.DataFrame, col: str) -> np.ndarray:
    return pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float)


def _tokens_per_step(d: Draft, k: np.ndarray, q: np.ndarray, alpha: np.ndarray, tau: np.ndarray,
                     error: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(tokens per step, acceptance source) per row: the measured length, else alpha, else the prior."""
    tps = np.full(k.shape, np.nan)
    source = np.full(k.shape, "", dtype=object)
    plain = (k == 0) | (not d.speculates)
    tps[plain] = 1.0
    source[plain] = "none (plain decoding)"
    given = ~plain & np.isfinite(tau)
    bad = given & ~((tau >= 1.0 - 1e-9) & (tau <= q + 1e-9))
    error[bad] = [f"acceptance_length {x:g} is outside [1, {v:g}] (tokens per step incl. the bonus token)"
                  for x, v in zip(tau[bad], q[bad], strict=True)]
    tps[given & ~bad] = tau[given & ~bad]
    source[given] = "measured acceptance length"
    use_alpha = ~plain & ~given & np.isfinite(alpha)
    bad_a = use_alpha & ~((alpha >= 0) & (alpha <= 1))
    error[bad_a] = [f"alpha must lie in [0, 1], got {a:g}" for a in alpha[bad_a]]
    for a, kk in {(float(a), int(kk)) for a, kk in zip(alpha[use_alpha & ~bad_a], k[use_alpha & ~bad_a],
                                                          strict=True)}:
        rows = use_alpha & ~bad_a & (alpha == a) & (k == kk)
        tps[rows] = dataclasses.replace(d, acceptance=AcceptanceProfile.from_alpha(a)).tokens_per_step(kk)
        source[rows] = f"alpha={a:g}"
    prior = ~plain & ~given & ~use_alpha
    known = d.acceptance.max_k
    for kk in np.unique(k[prior]).astype(int):
        rows = prior & (k == kk)
        if known is not None and kk > known:
            error[rows] = f"k = {kk} exceeds the {known} positions the acceptance profile knows"
            continue
        tps[rows] = d.tokens_per_step(kk)
        source[rows] = d.acceptance.source
    return tps, source


def _evaluate_setup(df: pd.DataFrame, t: Target, d: Draft, out: dict[str, np.ndarray], idx: np.ndarray) -> None:
    n = len(df)
    error = np.full(n, "", dtype=object)
    k = _numbers(df, "k")
    if not d.speculates:
        k = np.where(np.isnan(k), 0.0, k)
    batch, ctx = _numbers(df, "batch"), _numbers(df, "context")
    for name, arr, lo in (("k", k, 0), ("batch", batch, 1), ("context", ctx, 0)):
        bad = ~(np.isfinite(arr) & (arr >= lo) & (arr == np.round(arr)))
        error[bad & (error == "")] = [f"{name} must be an integer >= {lo}, got {v}" for v in
                                      df[name].to_numpy()[bad & (error == "")]]
    ok = error == ""
    k, batch, ctx = (np.where(ok, a, 1.0) for a in (k, batch, ctx))
    q = np.asarray(d.verify_tokens_per_seq(k), dtype=float) if d.speculates else np.ones(n)
    tps, source = _tokens_per_step(d, k, np.where(k > 0, q, 1.0), _numbers(df, "alpha"),
                                   _numbers(df, "acceptance_length"), error)
    m = step_arrays(t, d, k, batch, ctx, np.where(np.isfinite(tps), tps, 1.0))
    values = {name: np.broadcast_to(v, (n,)) for name, v in m.as_dict().items()}
    mem_gib = np.full(n, np.nan)
    cap_gib = np.full(n, np.nan)
    for kk in np.unique(k).astype(int):
        rows = k == kk
        mem = memory_per_gpu(t, d, kk, batch[rows], ctx[rows])
        mem_gib[rows] = mem.total / 2**30
        cap_gib[rows] = mem.capacity / 2**30
    no_fit = (error == "") & (mem_gib > cap_gib) & _flag(df["check_memory"].iloc[0])
    error[no_fit] = [f"does not fit: {a:.1f} GiB per GPU needed of {c:.1f} GiB" for a, c in
                     zip(mem_gib[no_fit], cap_gib[no_fit], strict=True)]
    good = error == ""
    for name in OUTPUTS[:8]:
        out[name][idx] = np.where(good, values[name], np.nan)
    out["tokens_per_step"][idx] = np.where(good, tps, np.nan)
    out["memory_gib"][idx] = mem_gib
    out["memory_capacity_gib"][idx] = cap_gib
    out["acceptance_source"][idx] = np.where(good, source, "")
    out["error"][idx] = error


def evaluate_grid(frame: pd.DataFrame, engines: Mapping[str, EngineProfile] | None = None) -> pd.DataFrame:
    """`frame` with OUTPUTS appended (see the module docstring); row order and other columns kept.
    `engines` replaces bundled engine profiles by name."""
    df = normalise(frame).reset_index(drop=True)
    n = len(df)
    out: dict[str, np.ndarray] = {name: np.full(n, np.nan) for name in OUTPUTS[:10]}
    out["acceptance_source"] = np.full(n, "", dtype=object)
    out["error"] = np.full(n, "", dtype=object)
    missing = df["hardware"].map(_blank) | df["model"].map(_blank)
    out["error"][missing.to_numpy()] = "hardware and model are required"
    keys = df[list(SETUP)].astype(str)
    for _, group in df[~missing].groupby([keys[c] for c in SETUP], sort=False, dropna=False):
        idx = group.index.to_numpy()
        try:
            t, d = _setup(group.iloc[0], engines)
        except SpecsimError as exc:
            out["error"][idx] = str(exc)
            continue
        _evaluate_setup(group, t, d, out, idx)
    result = frame.reset_index(drop=True).copy()
    for name in OUTPUTS:
        result[name] = out[name]
    return result

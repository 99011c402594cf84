"""A whole grid in one vectorised pass per draft: k x batch x context (x alpha).

The same step arithmetic as every other route (`plan.evaluate.step_arrays`), broadcast over k too,
so a sweep of millions of configurations is a few numpy calls.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from specsim.acceptance.chain import AcceptanceProfile, expected_tokens
from specsim.drafts.draft import Draft
from specsim.scenario.scenario import Scenario
from specsim.step.evaluate import Target, memory_per_gpu, step_arrays

if TYPE_CHECKING:  # pandas only for the tidy frame (the report's heat map uses the arrays)
    import pandas as pd


def _tokens_per_step(d: Draft, max_k: int, alphas: np.ndarray | None) -> np.ndarray:
    """[alpha, k] tokens per step: the draft's own profile (NaN past a measured profile's depth), or
    i.i.d. alphas (through the draft's tree for tree drafts)."""
    ks = np.arange(max_k + 1)
    if not d.speculates:
        return np.ones((1 if alphas is None else len(alphas), max_k + 1))
    if alphas is None:
        k_known = max_k if d.acceptance.max_k is None else d.acceptance.max_k
        return np.array([[d.tokens_per_step(int(kk)) if kk <= k_known else np.nan for kk in ks]])
    if d.is_tree:
        return np.array([[dataclasses.replace(d, acceptance=AcceptanceProfile.from_alpha(float(a))).tokens_per_step(
            int(kk)) for kk in ks] for a in alphas])
    return expected_tokens(np.asarray(alphas)[:, None], ks[None, :])


def sweep_arrays(t: Target, d: Draft, max_k: int, batch: np.ndarray, context: np.ndarray,
                 alphas: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Arrays of shape [alpha, k, batch, context] (alpha axis of length 1 without `alphas`): the
    figures of `plan.evaluate.step_arrays` plus `fits_memory`."""
    k = np.arange(max_k + 1, dtype=float)[None, :, None, None]
    b = np.asarray(batch, float)[None, None, :, None]
    c = np.asarray(context, float)[None, None, None, :]
    tps = _tokens_per_step(d, max_k, alphas)[:, :, None, None]
    m = step_arrays(t, d, k, b, c, tps)
    out = {name: value for name, value in m.as_dict().items()
           if name not in ("overhead_ms", "baseline_throughput_tok_s")}
    fit = [memory_per_gpu(t, d, int(kk), b[0, 0], c[0, 0]).fits for kk in range(max_k + 1)]
    out["fits_memory"] = np.stack(fit)[None]
    return out


def sweep_frame(s: Scenario, batch: np.ndarray, context: np.ndarray, alphas: np.ndarray | None,
                max_k: int) -> pd.DataFrame:
    """A tidy DataFrame: one row per (draft, alpha, k, batch, context)."""
    import pandas as pd

    from specsim.plan.decide import target_of

    t = target_of(s)
    frames = []
    for d in s.drafts:
        arr = sweep_arrays(t, d, max_k, batch, context, alphas)
        shape = np.broadcast_shapes(*(v.shape for v in arr.values()))
        a_idx, k_idx, b_idx, c_idx = np.indices(shape).reshape(4, -1)
        frame = {"draft": d.label, "method": d.method,
                 "alpha": (np.asarray(alphas)[a_idx] if alphas is not None else np.nan),
                 "k": k_idx, "batch": np.asarray(batch)[b_idx].astype(int),
                 "context": np.asarray(context)[c_idx].astype(int)}
        for name, v in arr.items():
            frame[name] = np.broadcast_to(v, shape).ravel()
        frames.append(pd.DataFrame(frame))
    return pd.concat(frames, ignore_index=True)

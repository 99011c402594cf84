"""A whole grid in one vectorised pass per draft: k x batch x context (x alpha).

Built from the same pieces as `speculate.config_metrics` (forward_time_s, draft_time_s, the step
overhead), broadcast over k too, so a sweep of millions of configurations is a few numpy calls.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specsim.acceptance.chain import expected_tokens
from specsim.cost.forward import forward_time_s
from specsim.drafts.cost import draft_time_s
from specsim.drafts.draft import Draft
from specsim.plan.evaluate import Target, memory_per_gpu, overhead_time_s
from specsim.plan.scenario import Scenario


def sweep_arrays(t: Target, d: Draft, max_k: int, batch: np.ndarray, context: np.ndarray,
                 alphas: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Arrays of shape [alpha, k, batch, context] (alpha axis of length 1 without `alphas`)."""
    hw, m = t.hardware, t.model
    k = np.arange(max_k + 1, dtype=float)[:, None, None]
    b = np.asarray(batch, float)[None, :, None]
    c = np.asarray(context, float)[None, None, :]
    base = forward_time_s(hw, m, b, 1, c, t.tp, t.weight_dtype, t.kv_dtype)
    q = d.verify_tokens_per_seq(k) if d.method != "none" else np.ones_like(k)
    verify = forward_time_s(hw, m, b, q, c, t.tp, t.weight_dtype, t.kv_dtype)
    verify = np.where(k > 0, verify, base)
    draft = np.where(k > 0, draft_time_s(d, hw, m, b, np.maximum(k, 1), c, t.tp, t.weight_dtype, t.kv_dtype), 0.0)
    over = overhead_time_s(t, b, k)
    ks = np.arange(max_k + 1)
    if alphas is None:
        # k beyond a measured profile's positions (no i.i.d. tail) is unknown: NaN, not extrapolated
        k_known = max_k if d.acceptance.max_k is None else d.acceptance.max_k
        tps = np.array([d.tokens_per_step(int(kk)) if kk <= k_known or d.method == "none" else np.nan
                        for kk in ks])[None, :]
    elif d.is_tree:
        tps = np.array([[Draft(d.method, type(d.acceptance).from_alpha(float(a)), topk=d.topk,
                               num_draft_tokens=d.num_draft_tokens).tokens_per_step(int(kk)) for kk in ks]
                        for a in alphas])
    else:
        tps = expected_tokens(np.asarray(alphas)[:, None], ks[None, :])
    if d.method == "none":
        tps = np.ones_like(tps)
    tps = tps[:, :, None, None]
    step = draft + verify + over
    out = {
        "tokens_per_step": np.broadcast_to(tps, tps.shape[:2] + step.shape[1:]),
        "step_ms": step * 1e3, "draft_ms": draft * 1e3, "verify_ms": verify * 1e3,
        "baseline_step_ms": base * 1e3,
    }
    out["speedup"] = tps * base / step
    out["throughput_tok_s"] = b * tps / step
    out["ms_per_token"] = step * 1e3 / tps
    fit = [memory_per_gpu(t, d, int(kk), b[0], c[0])["total"] <= hw.memory_bytes * t.memory_utilization for kk in ks]
    out["fits_memory"] = np.stack(fit)[None]
    return out


def sweep_frame(s: Scenario, batch: np.ndarray, context: np.ndarray, alphas: np.ndarray | None,
                max_k: int) -> pd.DataFrame:
    """A tidy DataFrame: one row per (draft, alpha, k, batch, context)."""
    from specsim.plan.optimize import target_of

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

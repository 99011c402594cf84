"""Verification cost: a pass's time by op family against tokens per pass, the ridge, and each
bucket's operating point."""

from __future__ import annotations

import numpy as np

from specsim.cost.forward import breakdown
from specsim.cost.ops import make_shape
from specsim.report import figures as fg
from specsim.report.context import Ctx, Section, fmt_ms, md_table, row_label


def _ridge_tokens(linear_compute_s: np.ndarray, linear_memory_s: np.ndarray, tokens: np.ndarray) -> int | None:
    bound = linear_compute_s >= linear_memory_s
    return int(tokens[np.argmax(bound)]) if bound.any() else None


def verification_section(c: Ctx) -> Section:
    s, t = c.s, c.t
    rows = c.data["buckets"]
    chosen = []
    for r in rows:
        d = c.draft_by_label(r["draft"])
        q = float(d.verify_tokens_per_seq(r["k"])) if d is not None and r["k"] else 1.0
        chosen.append(r["batch"] * q)
    t_max = max(1024, int(max(chosen) * 1.15))
    tokens = np.arange(1, t_max + 1, dtype=float)
    ctx_main = max(c.pooled, key=lambda cw: cw[1])[0]
    br = breakdown(t.model, t.hardware, make_shape(tokens, 1, ctx_main, t.tp, t.weight_dtype, t.kv_dtype))
    fam = {f: np.asarray(v, float) * 1e3 for f, v in br.by_family().items()}
    lin = [op for op in br.ops if op.family == "linear"]
    zero = np.zeros_like(tokens)
    ridge = _ridge_tokens(sum((op.compute_s * op.count for op in lin), zero),
                          sum((op.memory_s * op.count for op in lin), zero), tokens)
    curves = []
    multi = len(rows) > 1 and any(len(bp.bucket.contexts) > 1 for bp in c.plan.buckets)
    for r, tok in zip(rows, chosen, strict=True):
        d = c.draft_by_label(r["draft"]) or (c.draft if c.draft is not None else c.s.drafts[0])
        qs = np.unique([float(d.verify_tokens_per_seq(k)) if k else 1.0 for k in range(s.max_k + 1)])
        b = float(r["batch"])
        shape = make_shape(b, qs, r["context"], t.tp, t.weight_dtype, t.kv_dtype)
        bd = breakdown(t.model, t.hardware, shape)
        label = f"{row_label(r, multi)} B={r['batch']}"
        curves.append(fg.VerifyCurve(label, b * qs, np.asarray(bd.time_s) * 1e3,
                                     np.asarray(bd.by_family()["attention"]) * 1e3, r["baseline_step_ms"], tok,
                                     r["verify_ms"] if r["k"] else r["baseline_step_ms"]))
    if c.s.arrival is not None:  # plain decoding runs at its own (higher) Little's-law concurrency
        base = c.plan.buckets[0].baseline_rows[0]
        bd = breakdown(t.model, t.hardware, make_shape(float(base["batch"]), [1.0], base["context"], t.tp,
                                                       t.weight_dtype, t.kv_dtype))
        curves.append(fg.VerifyCurve(f"without speculation B={base['batch']}", np.array([float(base["batch"])]),
                                     np.asarray(bd.time_s) * 1e3, np.asarray(bd.by_family()["attention"]) * 1e3,
                                     base["baseline_step_ms"], float(base["batch"]), base["baseline_step_ms"]))
    fig = fg.verification_cost(tokens, fam, ctx_main, ridge, curves, c.title)
    dtype = "fp8" if t.weight_dtype == "fp8" else "bf16"
    text = [f"A pass's cost is flat in the number of tokens it carries until the linear layers (the weight "
            f"reads) turn compute-bound: on {t.hardware.name} with {dtype} GEMMs at tp {t.tp} that ridge is at "
            + (f"**T = {ridge} tokens per pass**" if ridge else "more than the plotted range")
            + ". Above it each extra verified token costs compute, in steps at GEMM tile boundaries. Attention "
            "reads each sequence's KV cache once for all the tokens it verifies, so it barely grows with k.", ""]
    trows = []
    for r, tok in zip(rows, chosen, strict=True):
        v = r["verify_ms"] if r["k"] else r["baseline_step_ms"]
        trows.append([row_label(r, multi), r["batch"], f"{r['context']:,}", r["k"], f"{tok:g}",
                      fmt_ms(r["baseline_step_ms"]), fmt_ms(v), f"{v / r['baseline_step_ms']:.2f}",
                      "above" if ridge and tok >= ridge else "below"])
    text.append(md_table(["bucket", "batch", "context", "k", "tokens per pass", "decode pass ms", "verify pass ms",
                           "verify / decode", "ridge"], trows, "lrrrrrrrl"))
    return Section("Verification cost", "\n".join(text), fig, "verification_cost",
                   "Verification cost by op family against tokens per pass, with each bucket's operating point")

"""Verification cost: a pass's time by op family against tokens per pass, the ridge, and each
bucket's operating point.

Every pass here is priced as the plan prices it, the way the target's engine runs it
(`engines.passes.pass_time_s`, the time `evaluate` and `plan` report as the verification pass): the batch
padded to a captured CUDA-graph size, the engine's all-reduce inside the graph (custom all-reduce on vLLM,
SGLang and TensorRT-LLM; eager NCCL outside a graph), attention for the real sequences only, and the graph
launch or an eager pass's host dispatch; a fractional number of tokens per sequence (an n-gram batch mixing
sequences with and without a draft) interpolated between whole counts, as the plan does."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from specsim.cost.forward import FAMILIES, ForwardBreakdown, breakdown
from specsim.cost.ops import make_shape
from specsim.drafts.draft import Draft
from specsim.drafts.families.lookup import ngram_drafted_tokens
from specsim.engines.passes import gpu_only, graph_batch, pass_time_s
from specsim.engines.profile import EngineProfile
from specsim.report.context import Ctx, Section, fmt_ms, md_table, row_label
from specsim.report.figures import verification as fg
from specsim.step.evaluate import Target
from specsim.step.policy import Config


def _ridge_tokens(linear_compute_s: np.ndarray, linear_memory_s: np.ndarray, tokens: np.ndarray) -> int | None:
    bound = linear_compute_s >= linear_memory_s
    return int(tokens[np.argmax(bound)]) if bound.any() else None


def verify_engine(t: Target, d: Draft | None) -> EngineProfile:
    """The engine profile the plan prices d's verification pass with: an eager loop's kernels only (its host
    side is priced per cycle), else the target's engine as it is."""
    e = t.engine
    loop = d is not None and e.eager_loop is not None and d.method in e.eager_loop.methods
    return gpu_only(e) if loop else e


def _whole_split_s(t: Target, e: EngineProfile, b: np.ndarray, q: np.ndarray, ctx: np.ndarray
                   ) -> dict[str, np.ndarray]:
    """`engine_pass_split_ms` at whole tokens per sequence, in seconds."""
    b_run, graphed = graph_batch(e, b, q)
    impl = e.allreduce if t.gpus > 1 else "nccl"

    def families(allreduce: str) -> dict[str, np.ndarray]:
        br: ForwardBreakdown = breakdown(t.model, t.hardware, make_shape(b_run, q, ctx, t.par, t.weight_dtype,
                                                                         t.kv_dtype, allreduce))
        return {f: np.asarray(v, dtype=float) for f, v in br.by_family().items()}

    eager = families("nccl") if not graphed.all() else None
    graph = (eager if eager is not None and impl == "nccl" else families(impl)) if graphed.any() else None
    only = graph if graph is not None else eager
    assert only is not None  # one of the two modes runs
    out: dict[str, np.ndarray] = {}
    for f in FAMILIES:
        if f != "overhead":
            out[f] = np.where(graphed, graph[f], eager[f]) if graph is not None and eager is not None else only[f]
    # a padded graph's slots carry no KV cache: attention for the real sequences only (passes._gpu_time_s)
    out["attention"] = out["attention"] * np.where(graphed, b / np.maximum(b_run, 1.0), 1.0)
    total = pass_time_s(e, t.hardware, t.model, b, q, ctx, t.par, t.weight_dtype, t.kv_dtype)
    # the rest of the engine's pass: the graph launch, or the host dispatch an eager pass waits on
    out["overhead"] = np.asarray(total, dtype=float) - sum(out.values(), np.zeros(np.shape(total)))
    return out


def engine_pass_split_ms(t: Target, e: EngineProfile, batch: ArrayLike, q_per_seq: ArrayLike,
                         context_len: ArrayLike) -> dict[str, np.ndarray]:
    """A forward pass of B sequences x q tokens over context L as engine e runs it, split by op family (ms):
    the families sum to the plan's pass time (`pass_time_s`; `evaluate`'s verify_ms). "overhead" is the
    engine's launch / host part; "communication" is the all-reduce the engine runs (module docstring)."""
    b, q, ctx = (np.asarray(a, dtype=float) for a in np.broadcast_arrays(batch, q_per_seq, context_len))
    lo = np.floor(q)
    low = _whole_split_s(t, e, b, lo, ctx)
    if np.all(lo == q):
        return {f: v * 1e3 for f, v in low.items()}
    high = _whole_split_s(t, e, b, lo + 1.0, ctx)
    return {f: (low[f] + (q - lo) * (high[f] - low[f])) * 1e3 for f in low}


def pass_total_ms(split: dict[str, np.ndarray]) -> np.ndarray:
    """The whole pass of an `engine_pass_split_ms` split (ms)."""
    return np.asarray(sum(split.values(), np.zeros(np.shape(next(iter(split.values()))))), dtype=float)


def verify_tokens(t: Target, d: Draft, k: int, topk: int = 1, nodes: int | None = None,
                  tokens_per_step: float | None = None) -> float:
    """Tokens per sequence in the verification pass of configuration (k, topk, nodes), as the plan prices it:
    what the method feeds per chain (k + 1; lookahead more), nodes + 1 for a tree; an n-gram draft on an
    engine that skips requests without a match verifies 1 + the tokens actually drafted (`step_arrays`)."""
    if not k or not d.speculates:
        return 1.0
    cfg = Config(k, topk, nodes)
    if d.verifies_drafted_only(t.engine):
        tps = cfg.draft(d).tokens_per_step(k) if tokens_per_step is None else tokens_per_step
        return float(1.0 + ngram_drafted_tokens(k, tps))
    return float(cfg.verify_tokens(d))


def verification_section(c: Ctx) -> Section:
    t = c.t
    rows = c.data["buckets"]
    qs_chosen = []
    for r in rows:
        d = c.draft_by_label(r["draft"])
        qs_chosen.append(verify_tokens(t, d, r["k"], r["topk"], r["num_draft_tokens"], r["tokens_per_step"])
                         if d is not None and r["k"] else 1.0)
    chosen = [r["batch"] * q for r, q in zip(rows, qs_chosen, strict=True)]
    t_max = max(1024, int(max(chosen) * 1.15))
    tokens = np.arange(1, t_max + 1, dtype=float)
    ctx_main = max(c.pooled, key=lambda cw: cw[1])[0]
    # (a): a decode pass of T sequences as the engine runs it (graph padding, its all-reduce, its launch)
    fam = engine_pass_split_ms(t, t.engine, tokens, 1.0, ctx_main)
    br = breakdown(t.model, t.hardware, make_shape(tokens, 1, ctx_main, t.par, t.weight_dtype, t.kv_dtype))
    lin = [op for op in br.ops if op.family == "linear"]
    zero = np.zeros_like(tokens)
    ridge = _ridge_tokens(sum((op.compute_s * op.count for op in lin), zero),
                          sum((op.memory_s * op.count for op in lin), zero), tokens)
    multi = len(rows) > 1 and any(len(bp.bucket.contexts) > 1 for bp in c.plan.buckets)
    curves, decode_ms = _bucket_curves(c, rows, qs_chosen, multi)
    engine = t.engine
    graphed = engine.cuda_graphs and bool(engine.graph_sizes)
    graphs = (f"CUDA graphs up to {engine.graph_sizes[-1]} {engine.graph_unit}, {engine.allreduce} all-reduce "
              "inside them" if graphed else "without CUDA graphs, NCCL all-reduce")
    comm = "all-reduce"
    if graphed and t.gpus > 1:
        comm += f" ({engine.allreduce} in a CUDA graph" + (
            f"; eager NCCL above T = {engine.graph_sizes[-1]})" if tokens[-1] > engine.graph_sizes[-1] else ")")
    names = {"communication": comm, "overhead": "launch / host (graph replay or eager dispatch)"}
    fig = fg.verification_cost(tokens, fam, ctx_main, ridge, curves, c.title, names=names,
                               engine=f"{engine.name} runs them: {graphs}")
    dtype = "fp8" if t.weight_dtype == "fp8" else "bf16"
    text = [f"A pass's cost is flat in the number of tokens it carries until the linear layers (the weight "
            f"reads) turn compute-bound: on {t.hardware.name} with {dtype} GEMMs at tp {t.tp} that ridge is at "
            + (f"**T = {ridge} tokens per pass**" if ridge else "more than the plotted range")
            + ". Above it each extra verified token costs compute, in steps at GEMM tile boundaries. Attention "
            "reads each sequence's KV cache once for all the tokens it verifies, so it barely grows with k. "
            f"Passes are priced as {engine.name} runs them ({graphs}), the same pricing as the plan's step "
            "figures: the table's pass times are points on the figure's curves. A tree verifies its nodes + 1 "
            "tokens per sequence, a chain k + 1.", ""]
    trows = []
    for r, tok, dec in zip(rows, chosen, decode_ms, strict=True):
        v = r["verify_ms"] if r["k"] else dec
        trows.append([row_label(r, multi), r["batch"], f"{r['context']:,}", r["k"],
                      f"{tok:g}" if float(tok).is_integer() else f"{tok:.1f}",
                      fmt_ms(dec), fmt_ms(v), f"{v / dec:.2f}", "above" if ridge and tok >= ridge else "below"])
    text.append(md_table(["bucket", "batch", "context", "k", "tokens per pass", "decode pass ms", "verify pass ms",
                          "verify / decode", "ridge"], trows, "lrrrrrrrl"))
    return Section("Verification cost", "\n".join(text), fig, "verification_cost",
                   "Verification cost by op family against tokens per pass, with each bucket's operating point")


def _bucket_curves(c: Ctx, rows: list[dict[str, Any]], qs_chosen: list[float], multi: bool
                   ) -> tuple[list[fg.VerifyCurve], list[float]]:
    """Each bucket's pass cost as the tokens per sequence grow, through its chosen configuration's own count,
    with plain decoding's pass there (and, for an arrival rate, plain decoding at its own concurrency)."""
    s, t = c.s, c.t
    curves = []
    decode_ms = []
    for r, q_c in zip(rows, qs_chosen, strict=True):
        d = c.draft_by_label(r["draft"]) or (c.draft if c.draft is not None else c.s.drafts[0])
        e = verify_engine(t, d) if r["k"] else t.engine
        # the pass as the tokens per sequence grow, through the chosen configuration's own count
        qs = np.unique(np.r_[np.arange(1.0, max(float(s.max_k) + 1.0, np.ceil(q_c)) + 1.0), q_c])
        b = float(r["batch"])
        split = engine_pass_split_ms(t, e, b, qs, r["context"])
        total = pass_total_ms(split)
        decode = float(pass_total_ms(engine_pass_split_ms(t, t.engine, b, 1.0, r["context"])))  # plain decoding
        decode_ms.append(decode)
        label = f"{row_label(r, multi)} B={r['batch']}"
        curves.append(fg.VerifyCurve(label, b * qs, total, split["attention"], decode, b * q_c,
                                     r["verify_ms"] if r["k"] else decode))
    if c.s.arrival is not None:  # plain decoding runs at its own (higher) Little's-law concurrency
        base = c.plan.buckets[0].baseline_rows[0]
        split = engine_pass_split_ms(t, t.engine, float(base.batch), 1.0, base.context)
        curves.append(fg.VerifyCurve(f"without speculation B={base.batch}", np.array([float(base.batch)]),
                                     np.atleast_1d(pass_total_ms(split)), np.atleast_1d(split["attention"]),
                                     base.verify_ms,
                                     float(base.batch), base.verify_ms))
    return curves, decode_ms

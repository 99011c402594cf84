"""Capacity-planning reports: `specsim report SCENARIO.yaml -o DIR` writes DIR/report.md,
DIR/report.html (one self-contained file: figures embedded as base64 PNG, no external CSS, JS or
fonts), DIR/figures/*.png and DIR/plan.json.

The plan's numbers come from one place, `summary.plan_dict` (what `specsim plan --format json`
prints): plan.json is that record, report.md's plan table is `summary.plan_markdown`, and every
derived figure (cost, GPUs) is computed from those rows. The sections add what a plan alone does
not show: the verification cost by op family, speedup by draft and k, the optimal k over batch and
acceptance, sensitivity, memory, capacity and the hardware profile's provenance.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import shutil
import tempfile
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from specsim.acceptance.chain import AcceptanceProfile, alpha_from_mean_tokens
from specsim.cost.forward import breakdown, forward_time_s
from specsim.cost.ops import make_shape
from specsim.drafts.build import make_draft
from specsim.drafts.draft import Draft
from specsim.errors import SpecsimError
from specsim.plan.capacity import cost_per_mtok_usd, max_rate_rps, replicas_needed, solver_max_rate
from specsim.plan.evaluate import Target, config_metrics, fits, memory_per_gpu
from specsim.plan.optimize import Plan, bucket_points, evaluate_draft, pick_k, score_configs, target_of
from specsim.plan.optimize import plan as make_plan
from specsim.plan.scenario import ArrivalLoad, Bucket, Scenario, load_scenario
from specsim.plan.summary import NAMES, plan_dict, plan_markdown
from specsim.plan.sweep import sweep_arrays
from specsim.report import figures as fg
from specsim.report.html import markdown_to_html

Progress = Callable[[str], None]
REFERENCE_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "vidur"
ACCEPTANCE_SCALES = (1.0, 0.9, 0.8)
HEATMAP_ALPHAS = np.round(np.arange(0.05, 0.951, 0.05), 2)
STEPS = ("plan", "verification cost", "speedup by draft and k", "optimal k heat map", "policy over the load",
         "sensitivity", "memory", "capacity and cost", "provenance", "writing")


@dataclass
class Section:
    title: str
    body: str  # Markdown; the figure (if any) goes after it
    figure: Figure | None = None
    figure_name: str = ""
    caption: str = ""
    after: str = ""  # Markdown after the figure


@dataclass
class Ctx:
    """What every section reads: the scenario, its target, the plan and its JSON record."""

    s: Scenario
    t: Target
    plan: Plan
    data: dict[str, Any]
    draft: Draft | None  # the draft the plan chose (its label), if any
    pooled: list[tuple[int, float]]  # (context, share of the day)
    grid: np.ndarray  # batch sizes for curves over batch

    @property
    def title(self) -> str:
        return self.s.name

    @property
    def gain_label(self) -> str:
        return "per-token speed gain" if self.s.objective == "latency" else "throughput gain"

    def draft_by_label(self, label: str) -> Draft | None:
        return next((d for d in self.s.drafts if d.label == label), None)


def _ms(x: float) -> str:
    return f"{x:.2f}"


def _md_table(header: list[str], rows: list[list[Any]], align: str | None = None) -> str:
    align = align or "l" + "r" * (len(header) - 1)
    sep = ["---:" if a == "r" else "---" for a in align]
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(sep) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def _row_label(r: dict[str, Any], multi_context: bool) -> str:
    return f"{r['bucket']} (L {r['context']:,})" if multi_context else str(r["bucket"])


# --- context ------------------------------------------------------------------------------------

def make_ctx(s: Scenario) -> Ctx:
    t = target_of(s)
    p = make_plan(s)
    data = plan_dict(p)
    pooled: dict[int, float] = {}
    for bp in p.buckets:
        for c, w in bp.bucket.contexts:
            pooled[c] = pooled.get(c, 0.0) + w * bp.bucket.weight
    batches = [bp.bucket.batch for bp in p.buckets] + [int(r["batch"]) for bp in p.buckets for r in bp.baseline_rows]
    top = max([*batches, 64]) * 2
    grid = np.unique(np.round(np.geomspace(1, top, 40)))
    draft = next((d for d in s.drafts if d.label == p.draft_label), None)
    return Ctx(s, t, p, data, draft, sorted(pooled.items()), grid)


# --- header and the plan --------------------------------------------------------------------------

def _describe_draft(d: Draft) -> str:
    name = NAMES.get(d.method, d.method)
    if d.model is not None:
        name += f" ({d.model.name}{f', tp {d.draft_tp}' if d.draft_tp else ''})"
    return f"{d.label}: {name}; acceptance {d.acceptance.source}"


def _describe_load(c: Ctx) -> str:
    s = c.s
    if s.arrival is not None:
        a = s.arrival
        return (f"{a.rate_rps:g} requests/s, {a.prompt_tokens:,}-token prompts, {a.output_tokens:,}-token outputs "
                "(concurrency by Little's law)")
    parts = []
    for b in s.buckets:
        ctxs = ", ".join(f"{cc:,} ({w:.0%})" if len(b.contexts) > 1 else f"{cc:,}" for cc, w in b.contexts)
        parts.append(f"{b.name}: {b.weight * 24:.1f} h at batch {b.batch}, context {ctxs}")
    return "; ".join(parts)


def header(c: Ctx) -> str:
    s, d = c.s, c.data
    lines = [f"# Speculative decoding plan: {s.name}", ""]
    if s.description:
        lines += [s.description, ""]
    lines += [f"> **Recommendation:** {d['recommendation']}", ""]
    slo = f", SLO {s.slo_ms_per_token:g} ms/token" if s.slo_ms_per_token else ""
    lines += [
        f"- **Target:** {s.model.name} on {s.tp}x {s.hardware.name}, weights {s.weight_dtype}, KV cache "
        f"{s.kv_dtype}, {s.memory_utilization:.0%} of GPU memory usable",
        f"- **Objective:** {s.objective}{slo}; k up to {s.max_k}",
        "- **Drafts considered:** " + "; ".join(_describe_draft(x) for x in s.drafts),
        f"- **Load:** {_describe_load(c)}",
        "- **Price:** " + (f"${s.gpu_hour_usd:g} per GPU-hour" if s.gpu_hour_usd is not None
                           else "not given (no dollar figures)"),
        "",
    ]
    return "\n".join(lines)


def plan_section(c: Ctx) -> Section:
    d = c.data
    body = [plan_markdown(c.plan).rstrip(), ""]
    if d["policy"] and c.s.arrival is None:
        rows = [[seg["batch_from"], seg["batch_to"],
                 "does not fit" if seg["k"] < 0 else ("off" if seg["k"] == 0 else seg["k"])] for seg in d["policy"]]
        body += [f"Policy for {d['draft']} over batch size (k never rises with load, as engines schedule it):", "",
                 _md_table(["batch from", "batch to", "k"], rows), ""]
    if d["arrival"]:
        a = d["arrival"]
        body += [f"At {a['rate_rps']:g} requests/s: {a['concurrency']:.1f} sequences in flight with speculation "
                 f"({a['ms_per_token']:.2f} ms/token), {a['baseline_concurrency']:.1f} without "
                 f"({a['baseline_ms_per_token']:.2f} ms/token).", ""]
    cfg = {k: v for k, v in d["engine_configs"].items() if v is not None}
    if cfg:
        body += ["Engine configuration (one line per engine):", "", "```",
                 *(f"{k}: {json.dumps(v, default=float)}" for k, v in cfg.items()), "```", ""]
    return Section("The plan", "\n".join(body))


# --- verification cost ------------------------------------------------------------------------------

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
    ridge = _ridge_tokens(sum(op.compute_s * op.count for op in lin), sum(op.memory_s * op.count for op in lin),
                          tokens)
    curves = []
    multi = len(rows) > 1 and any(len(bp.bucket.contexts) > 1 for bp in c.plan.buckets)
    for r, tok in zip(rows, chosen, strict=True):
        d = c.draft_by_label(r["draft"]) or (c.draft if c.draft is not None else c.s.drafts[0])
        qs = np.unique([float(d.verify_tokens_per_seq(k)) if k else 1.0 for k in range(s.max_k + 1)])
        b = float(r["batch"])
        shape = make_shape(b, qs, r["context"], t.tp, t.weight_dtype, t.kv_dtype)
        bd = breakdown(t.model, t.hardware, shape)
        label = f"{_row_label(r, multi)} B={r['batch']}"
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
        trows.append([_row_label(r, multi), r["batch"], f"{r['context']:,}", r["k"], f"{tok:g}",
                      _ms(r["baseline_step_ms"]), _ms(v), f"{v / r['baseline_step_ms']:.2f}",
                      "above" if ridge and tok >= ridge else "below"])
    text.append(_md_table(["bucket", "batch", "context", "k", "tokens per pass", "decode pass ms", "verify pass ms",
                           "verify / decode", "ridge"], trows, "lrrrrrrrl"))
    return Section("Verification cost", "\n".join(text), fig, "verification_cost",
                   "Verification cost by op family against tokens per pass, with each bucket's operating point")


# --- speedup by draft and k ---------------------------------------------------------------------------

def _pooled_arrays(c: Ctx) -> tuple[np.ndarray, np.ndarray]:
    return np.array([x for x, _ in c.pooled], float), np.array([w for _, w in c.pooled])


def speedup_section(c: Ctx) -> Section:
    s, t = c.s, c.t
    cvals, cw = _pooled_arrays(c)
    cw = cw / cw.sum()
    panels = []
    for d in s.drafts:
        arr = sweep_arrays(t, d, s.max_k, c.grid, cvals)
        shape = np.broadcast_shapes(arr["speedup"].shape, arr["fits_memory"].shape)
        sp = (np.broadcast_to(arr["speedup"], shape)[0] * cw).sum(-1)  # [k, batch], weighted over contexts
        ok = np.broadcast_to(arr["fits_memory"], shape)[0].all(-1)
        pts = [(bp.bucket.name, float(bp.bucket.batch), sum(r["share"] * r["speedup"] for r in bp.rows))
               for bp in c.plan.buckets if bp.draft == d.label and bp.k]
        panels.append(fg.SpeedupPanel(f"{d.label} ({NAMES.get(d.method, d.method)})", c.grid,
                                      np.where(ok, sp, np.nan), pts))
    fig = fg.speedup_vs_batch(panels, c.title)
    d = c.data
    text = ["Each line is one draft depth k; the dashed line is the best k at each batch, and red dots are the plan's "
            "buckets (speedup weighted over the load's contexts; lines stop where the KV cache no longer fits).", ""]
    if d["per_draft_gain"]:
        rows = [[lab, f"{g:.2f}x", (d["crossover_batch"].get(lab) if d["crossover_batch"].get(lab) is not None
                                    else "never (within the grid)")] for lab, g in d["per_draft_gain"].items()]
        text += [_md_table(["draft", f"{c.gain_label} over the day (best k per bucket)",
                            "speculation stops paying at batch"], rows, "lrr")]
    return Section("Speedup by draft and k", "\n".join(text), fig, "speedup_vs_batch",
                   "Speedup against batch for each draft method and k")


# --- optimal k heat map --------------------------------------------------------------------------------

def effective_alpha(d: Draft, k: int) -> float:
    """The i.i.d. acceptance rate with the same tokens per step as the draft's profile at depth k."""
    if not d.acceptance.rates and d.acceptance.tail is not None:
        return float(d.acceptance.tail)
    kk = max(k, 1)
    return float(alpha_from_mean_tokens(d.tokens_per_step(kk), kk))


def optimal_k_grid(c: Ctx, d: Draft, alphas: np.ndarray) -> np.ndarray:
    """The best k (the plan's scoring and 1% tie rule) at each (alpha, batch); -1 where nothing fits."""
    s, t = c.s, c.t
    cvals, cw = _pooled_arrays(c)
    arr = sweep_arrays(t, d, s.max_k, c.grid, cvals, alphas)
    shape = np.broadcast_shapes(*(v.shape for v in arr.values()))
    thr = np.broadcast_to(arr["throughput_tok_s"], shape)
    lat = np.broadcast_to(arr["ms_per_token"], shape)
    feas = np.broadcast_to(arr["fits_memory"], shape)
    best = np.full((len(alphas), len(c.grid)), -1)
    for i in range(len(alphas)):
        sc = score_configs({"throughput_tok_s": thr[i], "ms_per_token": lat[i]}, feas[i], cw, s.objective,
                    s.slo_ms_per_token)  # [k, batch]
        best[i] = [pick_k(sc[:, j]) for j in range(len(c.grid))]
    return best


def heatmap_section(c: Ctx) -> Section | None:
    d = c.draft or c.s.drafts[0]
    alphas = HEATMAP_ALPHAS
    best = optimal_k_grid(c, d, alphas)
    points = []
    for bp in c.plan.buckets:
        if not d.is_tree:
            points.append((bp.bucket.name, float(bp.bucket.batch), effective_alpha(d, bp.k or c.s.max_k), bp.k))
    fig = fg.optimal_k_heatmap(c.grid, alphas, best, c.s.max_k, d.label, points, c.title)
    a_eff = effective_alpha(d, c.plan.buckets[0].k or c.s.max_k)
    text = [f"The optimal k for {d.label} at each batch size and i.i.d. acceptance rate alpha (the same objective "
            f"and 1% tie rule as the plan, contexts pooled over the load). The scenario's acceptance for {d.label} "
            f"({d.acceptance.source}) is equivalent to alpha = {a_eff:.2f}: read off how much k would change "
            "if your measured acceptance differs."]
    return Section("Optimal k over batch and acceptance", "\n".join(text), fig, "optimal_k_heatmap",
                   f"Optimal k for {d.label} over (batch, alpha)")


# --- policy over the load --------------------------------------------------------------------------------

@dataclass
class RateModel:
    """Little's-law curves for one draft (k = 0..max_k) and the capacity under a latency SLO."""

    curves: list[fg.RateCurve]
    slo_ms: float
    slo_label: str
    prefill_s: float


def rate_model(c: Ctx) -> RateModel:
    s, t = c.s, c.t
    a = s.arrival
    assert a is not None and c.plan.arrival is not None
    d = c.draft or s.drafts[0]
    none = make_draft("none", s.model)
    # As optimize.solve_concurrency: prefill of the prompt, decode at the mean context.
    prefill_s = float(forward_time_s(t.hardware, t.model, 1, a.prompt_tokens, a.prompt_tokens / 2, t.tp,
                                     t.weight_dtype, t.kv_dtype))
    ctx = a.prompt_tokens + a.output_tokens / 2
    n = np.geomspace(1.0, 4096.0, 400)
    curves = []
    for k in range(s.max_k + 1):
        dd = d if k else none
        tpot_ms = np.asarray(config_metrics(t, dd, k, n, ctx).ms_per_token, float)
        rate = n / (prefill_s + a.output_tokens * tpot_ms / 1e3)
        ok = np.asarray(fits(t, dd, k, n, ctx), bool)
        end = int(np.argmin(ok)) if not ok.all() else len(n)
        end = min(end, int(np.argmax(rate[:end])) + 1) if end else 0  # beyond the peak rate: unstable
        curves.append(fg.RateCurve(k, rate[:end], tpot_ms[:end]))
    if s.slo_ms_per_token is not None:
        slo, label = s.slo_ms_per_token, "SLO"
    else:
        slo, label = c.plan.arrival["baseline_ms_per_token"], "assumed SLO (no speculation, one replica)"
    return RateModel(curves, float(slo), label, prefill_s)


def policy_section(c: Ctx, rm: RateModel | None) -> Section:
    s = c.s
    d = c.draft or s.drafts[0]
    if rm is not None:
        assert s.arrival is not None
        fig = fg.policy_over_load(rm.curves, s.arrival.rate_rps, rm.slo_ms, rm.slo_label, d.label, c.title)
        text = ("A rate-driven load has no day profile: the policy is laid over the arrival rate instead. Each curve "
                "is the per-token latency at the Little's-law concurrency a rate produces, for one k; speculation "
                "shortens each request, which lowers the concurrency, which keeps steps cheap. The lowest curve at a "
                "rate is the best k there; the saw-teeth are GEMM tile steps as the concurrency grows.")
        return Section("The policy over the load", text, fig, "policy_over_load",
                       "Per-token latency against arrival rate for each k")
    segs = []
    for bp in c.plan.buckets:
        thr = sum(r["share"] * r["throughput_tok_s"] for r in bp.rows)
        base = sum(r["share"] * r["throughput_tok_s"] for r in bp.baseline_rows)
        segs.append(fg.DaySegment(bp.bucket.name, bp.bucket.weight * 24, bp.bucket.batch, bp.k, thr / base))
    fig = fg.policy_over_day(segs, s.max_k, d.label, c.title)
    rows = [[sg.name, f"{sg.hours:.1f}", sg.batch, sg.k, f"{sg.speedup:.2f}x"] for sg in segs]
    text = ("The day's buckets in the scenario's order, each as wide as its hours, as high as its batch; the colour is "
            "the k the plan runs there.\n\n"
            + _md_table(["bucket", "hours", "batch", "k", "throughput gain"], rows, "lrrrr"))
    return Section("The policy over the day", text, fig, "policy_over_day", "The policy laid over the day's load")


# --- sensitivity --------------------------------------------------------------------------------------

def scale_profile(p: AcceptanceProfile, factor: float) -> AcceptanceProfile:
    """Acceptance rates (and tail) multiplied by factor, clipped to [0, 1]."""
    rates = tuple(float(np.clip(r * factor, 0.0, 1.0)) for r in p.rates)
    tail = None if p.tail is None else float(np.clip(p.tail * factor, 0.0, 1.0))
    return AcceptanceProfile(rates, tail, f"{p.source} (x{factor:g})")


def with_acceptance(s: Scenario, factor: float) -> Scenario:
    return dataclasses.replace(s, drafts=tuple(dataclasses.replace(d, acceptance=scale_profile(d.acceptance, factor))
                                               for d in s.drafts))


def _with_efficiency(s: Scenario, name: str, factor: float) -> Scenario:
    value = getattr(s.hardware.efficiency, name) * factor
    if name in ("gemm_compute", "memory", "attention_compute"):
        value = min(value, 1.0)
    return dataclasses.replace(s, hardware=s.hardware.with_efficiency(**{name: value}))


def _with_load(s: Scenario, factor: float) -> Scenario:
    if s.arrival is not None:
        return dataclasses.replace(s, arrival=dataclasses.replace(s.arrival, rate_rps=s.arrival.rate_rps * factor))
    return dataclasses.replace(s, buckets=tuple(dataclasses.replace(b, batch=max(1, round(b.batch * factor)))
                                                for b in s.buckets))


def _with_context(s: Scenario, factor: float) -> Scenario:
    if s.arrival is not None:
        a = s.arrival
        return dataclasses.replace(s, arrival=ArrivalLoad(a.rate_rps, max(1, round(a.prompt_tokens * factor)),
                                                          max(1, round(a.output_tokens * factor))))
    return dataclasses.replace(s, buckets=tuple(
        Bucket(b.name, b.weight, b.batch, tuple((max(1, round(cc * factor)), w) for cc, w in b.contexts))
        for b in s.buckets))


@dataclass(frozen=True)
class Replan:
    """What sensitivity needs of a re-made plan (small, so it crosses process boundaries cheaply)."""

    gain: float
    decision: tuple[str, str, tuple[int, ...]]  # method, draft, k per bucket
    recommendation: str
    error: str = ""


def replan(s: Scenario) -> Replan:
    try:
        p = make_plan(s)
    except SpecsimError as exc:
        return Replan(float("nan"), ("", "", ()), "", str(exc).removeprefix(f"{s.path}: "))
    return Replan(p.gain, _decision(p), plan_dict(p)["recommendation"])


def replan_all(scenarios: list[Scenario]) -> list[Replan]:
    """Re-make each plan; rate-driven plans (Little's-law solves, ~0.3 s each) are spread over the CPUs
    by forked workers where the platform has fork, serially otherwise or if the pool fails."""
    slow = any(x.arrival is not None for x in scenarios)
    workers = min(os.cpu_count() or 1, 4)
    if slow and workers > 1 and len(scenarios) > 2 and "fork" in multiprocessing.get_all_start_methods():
        try:
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
                return list(pool.map(replan, scenarios))
        except (OSError, RuntimeError, BrokenProcessPool):
            pass
    return [replan(x) for x in scenarios]


def _decision(p: Plan) -> tuple[str, str, tuple[int, ...]]:
    return p.method, (p.draft_label if p.method != "none" else ""), tuple(bp.k for bp in p.buckets)


def _change(base: Plan, other: Replan) -> str:
    if other.error:
        return f"no plan: {other.error}"
    b, o = _decision(base), other.decision
    if b == o:
        return "same plan"
    if o[0] == "none" and b[0] != "none":
        return "speculation off"
    if b[0] == "none" and o[0] != "none":
        return f"speculation on ({o[1]})"
    if b[1] != o[1]:
        return f"draft {b[1]} -> {o[1]}"
    what = "k" if len(b[2]) == 1 else "k per bucket"
    return f"{what} " + ",".join(map(str, b[2])) + " -> " + ",".join(map(str, o[2]))


def _swing_inputs(s: Scenario) -> list[tuple[str, tuple[float, float], Callable[[Scenario, float], Scenario], str]]:
    eff = s.hardware.efficiency
    load = "request rate" if s.arrival is not None else "batch sizes"
    ctx = "prompt and output lengths" if s.arrival is not None else "context lengths"
    return [
        ("acceptance rates", (0.8, 1.1), with_acceptance, "x"),
        (f"HBM bandwidth efficiency ({eff.memory:.2f})", (0.9, 1.1),
         lambda x, f: _with_efficiency(x, "memory", f), "x"),
        (f"GEMM compute efficiency ({eff.gemm_compute:.2f})", (0.9, 1.1),
         lambda x, f: _with_efficiency(x, "gemm_compute", f), "x"),
        (f"per-kernel overhead ({eff.kernel_overhead_us:.1f} us)", (0.5, 2.0),
         lambda x, f: _with_efficiency(x, "kernel_overhead_us", f), "x"),
        (load, (0.5, 2.0), _with_load, "x"),
        (ctx, (0.5, 2.0), _with_context, "x"),
    ]


def break_even_scales(c: Ctx) -> tuple[float | None, float | None]:
    """Bucket loads: the lowest acceptance scale (of the assumed) at which the chosen draft still pays in
    some bucket, and in every bucket (None: not even at the assumed acceptance)."""
    s, t, d = c.s, c.t, c.draft
    if s.arrival is not None or d is None:
        return None, None
    batch, ctx, share, owner = bucket_points(s.buckets)
    ev = evaluate_draft(t, d, s.max_k, batch, ctx)
    step_s = ev.values["step_ms"] / 1e3
    some: float | None = None
    every: float | None = None
    every_run = True
    for f in np.round(np.arange(1.0, 0.0, -0.02), 2):
        tps = np.array([d.tokens_per_step(k, float(f)) for k in range(s.max_k + 1)])[:, None]
        vals = {"throughput_tok_s": batch * tps / step_s, "ms_per_token": step_s * 1e3 / tps}
        ks = []
        for i in range(len(s.buckets)):
            idx = np.flatnonzero(owner == i)
            ks.append(max(pick_k(score_configs({k: v[:, idx] for k, v in vals.items()}, ev.feasible[:, idx], share[idx],
                                       s.objective, s.slo_ms_per_token)), 0))
        if not any(ks):
            break
        some = float(f)
        every_run = every_run and all(ks)
        if every_run:
            every = float(f)
    return some, every


def sensitivity_section(c: Ctx) -> Section:
    s = c.s
    inputs = _swing_inputs(s)
    jobs = [with_acceptance(s, f) for f in ACCEPTANCE_SCALES[1:]]
    jobs += [fn(s, f) for _, lohi, fn, _ in inputs for f in lohi]
    done = replan_all(jobs)
    acc = [Replan(c.plan.gain, _decision(c.plan), c.data["recommendation"]), *done[:len(ACCEPTANCE_SCALES) - 1]]
    gains = [r.gain for r in acc]
    rows = [[f"{f:.0%}" if f != 1 else "as assumed", r.recommendation or r.error, f"{r.gain:.2f}x",
             ",".join(str(k) for k in r.decision[2]), "-" if f == 1.0 else _change(c.plan, r)]
            for f, r in zip(ACCEPTANCE_SCALES, acc, strict=True)]
    swings, srows = [], []
    rest = done[len(ACCEPTANCE_SCALES) - 1:]
    for i, (name, (lo, hi), _, _) in enumerate(inputs):
        low, high = rest[2 * i], rest[2 * i + 1]
        swings.append(fg.Swing(name, f"x{lo:g}", f"x{hi:g}", low.gain, high.gain))
        srows.append([name] + [f"x{f:g}: " + (_change(c.plan, r) if r.error else f"{r.gain:.2f}x, {_change(c.plan, r)}")
                               for f, r in ((lo, low), (hi, high))])
    fig = fg.sensitivity(list(ACCEPTANCE_SCALES), gains, swings, c.plan.gain, c.gain_label, c.title)
    def swing(w: fg.Swing) -> float:
        ends = [g for g in (w.low_gain, w.high_gain, c.plan.gain) if np.isfinite(g)]
        return max(ends) - min(ends)

    ranked = sorted(swings, key=lambda w: -swing(w))
    flips = [r[0] for r in srows if "speculation off" in r[1] + r[2] or "draft " in r[1] + r[2]]
    no_plan = [r[0] for r in srows if "no plan" in r[1] + r[2]]
    text = ["**What if acceptance is lower than assumed?** The plan re-made with every draft's acceptance rates "
            "scaled down:", "",
            _md_table(["acceptance", "recommendation", c.gain_label, "k per bucket", "change"], rows, "llrll"), ""]
    some, every = break_even_scales(c)
    if some is not None:
        text += [f"Speculation with {c.plan.draft_label} keeps paying in at least one bucket down to **{some:.0%}** of "
                 "the assumed acceptance"
                 + (f", and in every bucket down to {every:.0%}." if every is not None else ".") + "", ""]
    text += ["**Which inputs the answer hinges on.** Each input moved down and up, everything else as assumed, "
             "and the plan re-made:", "",
             _md_table(["input", "moved down", "moved up"], srows, "lll"), "",
             f"The gain moves most with the {ranked[0].name.split(' (')[0]} and the "
             f"{ranked[1].name.split(' (')[0]}"
             + (f"; the recommendation itself changes with: {', '.join(x.split(' (')[0] for x in flips)}."
                if flips else "; no single move switches speculation off or changes the draft.")
             + (f" No plan exists at all when these move: {', '.join(x.split(' (')[0] for x in no_plan)} "
                "(the load no longer fits one replica)." if no_plan else "")]
    return Section("Sensitivity", "\n".join(text), fig, "sensitivity", "Sensitivity of the gain to the inputs")


# --- memory ------------------------------------------------------------------------------------------

GIB = float(2**30)


def _largest_batch(t: Target, d: Draft, k: int, context: float) -> int:
    one, two = (memory_per_gpu(t, d, k, b, context) for b in (1.0, 2.0))
    per_seq = float(two.total - one.total)
    fixed = float(one.total) - per_seq
    cap = float(one.capacity)
    return max(0, int((cap - fixed) // per_seq)) if per_seq > 0 else 0


def memory_section(c: Ctx) -> Section:
    s, t = c.s, c.t
    none = make_draft("none", s.model)
    labels, parts, rows = [], {p: [] for p in fg.MEMORY_PARTS}, []
    multi = any(len(bp.bucket.contexts) > 1 for bp in c.plan.buckets)
    for bp in c.plan.buckets:
        for r, base in zip(bp.rows, bp.baseline_rows, strict=True):
            d = c.draft_by_label(bp.draft)
            lab = _row_label({"bucket": bp.bucket.name, "context": r["context"]}, multi)
            settings = [(f"{bp.draft} k={bp.k}", d, bp.k, r["batch"])] if d is not None and bp.k else []
            settings.append(("no speculation", none, 0, base["batch"]))
            for name, dd, k, b in settings:
                m = memory_per_gpu(t, dd, k, b, r["context"])
                labels.append(f"{lab}, B={b}: {name}")
                for p in fg.MEMORY_PARTS:
                    parts[p].append(float(getattr(m, p)) / GIB)
                total = float(m.total) / GIB
                rows.append([lab, f"{r['context']:,}", name, b, f"{float(m.weights) / GIB:.1f}",
                             f"{float(m.kv_cache) / GIB:.1f}",
                             f"{(float(m.activations) + float(m.reserved)) / GIB:.1f}",
                             f"{(float(m.draft_weights) + float(m.draft_kv)) / GIB:.2f}", f"{total:.1f}",
                             "yes" if bool(m.fits) else "**no**",
                             _largest_batch(t, dd, k, r["context"])])
    total_gib = t.hardware.total_memory_bytes / GIB
    cap = total_gib * t.memory_utilization
    fig = fg.memory(labels, parts, cap, total_gib, c.title)
    text = (f"Per GPU, with weights split over tp = {t.tp} and {s.kv_dtype} KV cache, counted as vLLM counts it: "
            f"usable is {s.memory_utilization:.0%} (`gpu_memory_utilization`) of {total_gib:.1f} GiB = {cap:.1f} GiB, "
            "from which the weights, the activation peak of a profiling pass and the non-torch / CUDA-graph "
            "reserves come before the KV cache. Speculation adds the draft's weights and KV cache and the verified "
            "tokens' KV slots.\n\n"
            + _md_table(["bucket", "context", "setting", "batch", "weights GiB", "KV cache GiB",
                         "activations + reserves GiB", "draft GiB", "total GiB", "fits", "largest batch that fits"],
                        rows, "lrlrrrrrrlr"))
    return Section("Memory", text, fig, "memory", "Weights, KV cache, reserves and draft footprint against capacity")


# --- capacity and cost ---------------------------------------------------------------------------------

def capacity_section(c: Ctx, rm: RateModel | None) -> Section:
    s = c.s
    usd = s.gpu_hour_usd
    tp = s.tp
    if rm is None:
        rows, labels, g_base, g_spec, c_base, c_spec = [], [], [], [], [], []
        multi = any(len(bp.bucket.contexts) > 1 for bp in c.plan.buckets)
        for r in c.data["buckets"]:
            thr, base = r["throughput_tok_s"], r["baseline_throughput_tok_s"]
            lab = _row_label(r, multi)
            labels.append(lab)
            g_base.append(float(tp))
            g_spec.append(tp * base / thr)
            row = [lab, r["batch"], f"{base:,.0f}", f"{thr:,.0f}", f"{tp:g}", f"{tp * base / thr:.2f}"]
            if usd is not None:
                cb, cs = cost_per_mtok_usd(tp, usd, base), cost_per_mtok_usd(tp, usd, thr)
                c_base.append(cb)
                c_spec.append(cs)
                row += [f"{cb:.3f}", f"{cs:.3f}"]
            if s.slo_ms_per_token is not None:
                row += ["yes" if r["ms_per_token"] <= s.slo_ms_per_token else "**no**"]
            rows.append(row)
        header = ["bucket", "batch", "tok/s without", "tok/s with", "GPUs without", "GPUs with"]
        if usd is not None:
            header += ["$/M tokens without", "$/M tokens with"]
        if s.slo_ms_per_token is not None:
            header += [f"meets {s.slo_ms_per_token:g} ms/token"]
        w = np.array([r["weight"] for r in c.data["buckets"]])
        thr_day = float((w * [r["throughput_tok_s"] for r in c.data["buckets"]]).sum() / w.sum())
        base_day = float((w * [r["baseline_throughput_tok_s"] for r in c.data["buckets"]]).sum() / w.sum())
        text = [f"The token rate each bucket needs is taken as what plain decoding delivers there (one replica of "
                f"{tp} GPUs at the bucket's batch); with speculation the same rate takes {tp} x baseline / speculative "
                "throughput GPUs (GPU-equivalents at the same batch per replica; whole replicas come in steps of "
                f"{tp}).", "", _md_table(header, rows), ""]
        if usd is not None:
            text += [f"Over the day: **${cost_per_mtok_usd(tp, usd, base_day):.3f} per million output tokens without "
                     f"speculation, ${cost_per_mtok_usd(tp, usd, thr_day):.3f} with** (at ${usd:g} per GPU-hour, "
                     f"{base_day:,.0f} vs {thr_day:,.0f} tokens/s per replica on average)."]
        else:
            text += ["The scenario gives no `gpu_hour_usd`, so there are no dollar figures; add it to get cost per "
                     "million tokens."]
        fig = fg.capacity(labels, g_base, g_spec, c_base if usd is not None else None,
                          c_spec if usd is not None else None, "GPUs to carry the baseline's token rate", c.title)
        return Section("Capacity and cost", "\n".join(text), fig, "capacity",
                       "GPUs and cost per million tokens with and without speculation")
    a = s.arrival
    assert a is not None
    d = c.draft or s.drafts[0]
    none = make_draft("none", s.model)
    est = [max_rate_rps(cv, rm.slo_ms, rm.prefill_s, a.output_tokens) for cv in rm.curves]
    base_cap = solver_max_rate(c.t, none, 0, a, rm.slo_ms, est[0])
    # refine the two most promising k by the planner's own solver; the best of them is the fleet's k
    top = sorted(range(1, len(est)), key=lambda k: -est[k])[:2]
    spec_cap, spec_k = max(((solver_max_rate(c.t, d, k, a, rm.slo_ms, est[k]), k) for k in top),
                           key=lambda x: (x[0], -x[1]), default=(0.0, 0))
    if spec_cap <= base_cap:
        spec_cap, spec_k = base_cap, 0
    mults = (1, 2, 4, 8)
    labels = [f"{a.rate_rps * m:g} req/s" for m in mults]
    g_base = [replicas_needed(c.t, none, 0, a, rm.slo_ms, a.rate_rps * m, base_cap) * s.tp for m in mults]
    g_spec = [replicas_needed(c.t, d if spec_k else none, spec_k, a, rm.slo_ms, a.rate_rps * m, spec_cap) * s.tp
              for m in mults]
    tok_s = [a.rate_rps * m * a.output_tokens for m in mults]
    rows = [["requests/s one replica serves within the SLO", f"{base_cap:.3g}", f"{spec_cap:.3g}"]]
    for lab, gb, gs in zip(labels, g_base, g_spec, strict=True):
        rows.append([f"GPUs for {lab}", f"{gb:g}", f"{gs:g}"])
    c_base = c_spec = None
    if usd is not None:
        c_base = [cost_per_mtok_usd(g, usd, ts) for g, ts in zip(g_base, tok_s, strict=True)]
        c_spec = [cost_per_mtok_usd(g, usd, ts) for g, ts in zip(g_spec, tok_s, strict=True)]
        rows.append([f"$/M output tokens at {labels[0]}", f"{c_base[0]:.2f}", f"{c_spec[0]:.2f}"])
        if base_cap > 0 and spec_cap > 0:
            rows.append(["$/M output tokens at full SLO-bound load",
                         f"{cost_per_mtok_usd(s.tp, usd, base_cap * a.output_tokens):.2f}",
                         f"{cost_per_mtok_usd(s.tp, usd, spec_cap * a.output_tokens):.2f}"])
    slo_text = (f"the SLO of {rm.slo_ms:g} ms/token" if s.slo_ms_per_token is not None else
                f"an **assumed** latency target of {rm.slo_ms:.2f} ms/token: the scenario gives no "
                "`slo_ms_per_token`, so the target is what plain decoding achieves on one replica at the scenario's "
                "rate")
    gpus = f"{s.tp} GPU{'s' if s.tp > 1 else ''}"
    text = [f"A replica is {gpus}; requests are split evenly over replicas, and each replica's per-token latency "
            f"at its Little's-law concurrency must meet {slo_text}. With speculation the best k at the SLO-bound load "
            f"is k = {spec_k}.", "",
            _md_table(["", "without speculation", f"with speculation ({d.label}, k = {spec_k})"],
                      rows, "lrr")]
    if usd is None:
        text += ["", "The scenario gives no `gpu_hour_usd`, so there are no dollar figures."]
    fig = fg.capacity(labels, g_base, g_spec, c_base, c_spec, "GPUs to serve the rate within the SLO", c.title,
                      "arrival rate, the scenario's and multiples (requests/s)")
    return Section("Capacity and cost", "\n".join(text), fig, "capacity",
                   "GPUs needed and cost per million tokens as traffic grows")


# --- provenance and assumptions --------------------------------------------------------------------------

def profile_kind(source: str) -> str:
    low = source.lower()
    if "transferred" in low:
        return "transferred from a profile fitted on another GPU (an estimate)"
    if "fitted" in low or "calibrat" in low:
        return "fitted to measured kernel timings"
    return "datasheet figures and default efficiencies (not fitted)"


def fit_quality(hw_name: str, reference: Path | None) -> str:
    """MAPE of the profile against the reference timings for its GPU, when they are present."""
    from specsim.calibration.measurements import mape_by, predict_rows, token_band
    from specsim.calibration.vidur import VIDUR_DEVICES, import_vidur
    from specsim.cost.hardware import load_hardware

    root = reference if reference is not None else REFERENCE_DIR
    if hw_name not in VIDUR_DEVICES.values():
        return (f"No reference timings exist for {hw_name} (the bundled reference covers "
                f"{', '.join(sorted(VIDUR_DEVICES.values()))}), so its fit cannot be checked here.")
    if not (root / "compute").is_dir():
        return f"The reference timings ({root}) are not present here, so the fit was not checked in this run."
    df = import_vidur(root)
    rows = df[(df["device"] == hw_name) & (df["op"] == "gemm")].copy()
    rows["predicted_ms"] = predict_rows(rows, load_hardware(hw_name))
    rows["band"] = token_band(rows["tokens"])
    overall = mape_by(rows)
    bands = mape_by(rows, "band")
    per = ", ".join(f"{b}: {v:.1f}%" for b, v in bands.items())
    return (f"Against {len(rows):,} measured linear-layer timings for this GPU (Vidur, all models, tp 1-8): mean "
            f"absolute error **{overall:.1f}%**; by tokens per GEMM {per}.")


def provenance_section(c: Ctx, reference: Path | None) -> Section:
    s, hw = c.s, c.s.hardware
    eff = hw.efficiency
    lines = [f"**{hw.name}**: {hw.description}. Efficiency parameters are **{profile_kind(eff.source)}**: "
             f"\"{eff.source.strip()}\"", "", fit_quality(hw.name, reference), ""]
    peaks = ", ".join(f"{k} {v / 1e12:g}" for k, v in hw.peak_flops_per_s.items() if v is not None and k != "fp32")
    prow = [["memory", f"{hw.memory_bytes / 1e9:g} GB ({hw.total_memory_bytes / GIB:.1f} GiB usable by CUDA)"],
            ["HBM bandwidth", f"{hw.mem_bw_bytes_per_s / 1e12:g} TB/s"],
            ["dense peaks", f"{peaks} TFLOPS"],
            ["interconnect", f"{hw.interconnect.kind}, all-reduce {hw.interconnect.allreduce_busbw_bytes_per_s / 1e9:g}"
                             f" GB/s bus bandwidth + {hw.interconnect.allreduce_latency_s * 1e6:g} us"],
            ["launch overhead per pass", f"{hw.launch_overhead_s * 1e6:g} us"]]
    prow += [[f"efficiency.{k}", f"{getattr(eff, k):.4g}"] for k in eff.FITTABLE]
    prow += [[f"provenance.{k}", str(v)] for k, v in hw.provenance.items()]
    lines += [_md_table(["profile field", "value"], prow, "ll"), "", "### Assumptions", ""]
    a = [f"Every number is a model prediction from the roofline cost model (`specsim forward`) and the acceptance "
         f"model, not a measurement; hardware profile `{Path(hw.source_path).name or hw.name}`.",
         f"Target {s.model.name}: {s.model.n_params() / 1e9:.1f} B parameters, {s.weight_dtype} weights, "
         f"{s.kv_dtype} KV cache, tensor parallel {s.tp}; {s.memory_utilization:.0%} of GPU memory usable.",
         "Acceptance: " + "; ".join(f"{d.label}: {d.acceptance.source}" for d in s.drafts) + ".",
         "A chain of k draft tokens yields 1 + a1 + a1 a2 + ... tokens per step (trees: the expected accepted "
         "path); acceptance does not depend on batch or context.",
         "The plan's figures are steady-state decode steps at each bucket's batch; prefill interference, "
         "scheduling gaps and KV-cache paging overheads are not modelled.",
         "Scores within 1% count as a tie, broken towards the smaller k; the policy over batch never raises k "
         "with load (as vLLM and TensorRT-LLM schedules do).",
         "Sensitivity: inputs moved one at a time (acceptance x0.8/x1.1, efficiencies x0.9/x1.1 capped at 1, "
         "kernel overhead x0.5/x2, load and context x0.5/x2)."]
    if s.arrival is not None:
        a.append("Concurrency by Little's law, N = rate x (prefill + output x time per token), solved with "
                 "speculation in the loop; requests split evenly over replicas.")
    else:
        a.append("Buckets are shares of a day (hours); the cost over the day weights each bucket's throughput by its "
                 "hours.")
    if s.gpu_hour_usd is not None:
        a.append(f"${s.gpu_hour_usd:g} per GPU-hour, paid whether or not the GPU is busy.")
    if s.slo_ms_per_token is None:
        a.append("No latency SLO is given" + ("; the capacity section assumes one (stated there)."
                                              if s.arrival is not None else "."))
    lines += [f"- {x}" for x in a]
    return Section("Hardware profile and assumptions", "\n".join(lines))


# --- assembling -----------------------------------------------------------------------------------------

def build_sections(s: Scenario, reference: Path | None = None, progress: Progress | None = None
                   ) -> tuple[Ctx, list[Section]]:
    tick = progress or (lambda _step: None)
    tick(STEPS[0])
    c = make_ctx(s)
    rm = rate_model(c) if s.arrival is not None else None
    sections = [plan_section(c)]
    for step, fn in ((STEPS[1], verification_section), (STEPS[2], speedup_section), (STEPS[3], heatmap_section)):
        tick(step)
        sec = fn(c)
        if sec is not None:
            sections.append(sec)
    tick(STEPS[4])
    sections.append(policy_section(c, rm))
    tick(STEPS[5])
    sections.append(sensitivity_section(c))
    tick(STEPS[6])
    sections.append(memory_section(c))
    tick(STEPS[7])
    sections.append(capacity_section(c, rm))
    tick(STEPS[8])
    sections.append(provenance_section(c, reference))
    return c, sections


def render_markdown(c: Ctx, sections: list[Section]) -> str:
    out = [header(c)]
    figs = [sec for sec in sections if sec.figure is not None]
    if figs:
        out += ["Contents: " + " · ".join(sec.title for sec in sections), ""]
    for sec in sections:
        out += [f"## {sec.title}", "", sec.body.rstrip(), ""]
        if sec.figure is not None:
            out += [f"![{sec.caption}](figures/{sec.figure_name}.png)", ""]
        if sec.after:
            out += [sec.after.rstrip(), ""]
    out += ["---", "", f"Generated by `specsim report {Path(c.s.path).name}`; the plan's numbers are those of "
            f"`specsim plan {Path(c.s.path).name} --format json` (plan.json).", ""]
    return "\n".join(out)


# --- writing ---------------------------------------------------------------------------------------------

OUTPUTS = ("report.html", "report.md", "plan.json", "figures")


def _install(tmp: Path, out: Path) -> None:
    """Move a finished report from tmp into out, replacing only the report's own files."""
    if not out.exists():
        tmp.rename(out)
        return
    if not out.is_dir():
        raise SpecsimError(f"{out}: exists and is not a directory")
    for name in OUTPUTS:
        src, dst = tmp / name, out / name
        if name == "figures":
            old = out / ".figures.old"
            if old.exists():
                shutil.rmtree(old)
            if dst.exists():
                dst.rename(old)
            src.rename(dst)
            shutil.rmtree(old, ignore_errors=True)
        else:
            src.replace(dst)
    shutil.rmtree(tmp, ignore_errors=True)


def write_report(scenario: str | Path | Scenario, out: str | Path, reference: Path | None = None,
                 progress: Progress | None = None, dpi: int = 100) -> dict[str, Any]:
    """Build the report for a scenario (file) into directory `out`; nothing is left half-written on error."""
    s = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
    out = Path(out)
    parent = out.resolve().parent
    if not parent.is_dir():
        raise SpecsimError(f"{out}: parent directory {parent} does not exist")
    c, sections = build_sections(s, reference, progress)
    if progress:
        progress(STEPS[9])
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=parent))
    mask = os.umask(0)
    os.umask(mask)
    tmp.chmod(0o777 & ~mask)  # mkdtemp makes it private; the report folder should be as any other
    try:
        (tmp / "figures").mkdir()
        names = []
        for sec in sections:
            if sec.figure is not None:
                fg.save_png(sec.figure, str(tmp / "figures" / f"{sec.figure_name}.png"), dpi)
                names.append(f"{sec.figure_name}.png")
        (tmp / "plan.json").write_text(json.dumps(c.data, indent=2, default=float) + "\n")
        md = render_markdown(c, sections)
        (tmp / "report.md").write_text(md)
        (tmp / "report.html").write_text(markdown_to_html(md, tmp, f"specsim report: {s.name}"))
        _install(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"dir": out, "figures": names, "recommendation": c.data["recommendation"]}

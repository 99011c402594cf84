"""Capacity and cost: the report's one sizing (report/fleet.py) - GPUs, the requests/s a replica serves and the
dollars per million output tokens, with and without speculation - and, for a fleet sized by simulation, why the
analytic model's ceiling differs from it."""

from __future__ import annotations

from typing import Any

from specsim.drafts.build import make_draft
from specsim.plan.capacity import replicas_needed
from specsim.plan.summary import gain_band
from specsim.report.context import Ctx, Section, md_table, row_label
from specsim.report.figures import capacity as fg
from specsim.report.fleet import LITTLE, SIMULATED, Fleet
from specsim.report.sections.policy import RateModel

#: rates of the analytic sizing table, as multiples of the scenario's
RATE_MULTIPLES = (1, 2, 4, 8)


def usd(x: float | None) -> str:
    """Dollars per million output tokens as every section writes them."""
    return "-" if x is None else f"${x:.3f}"


def capacity_section(c: Ctx, rm: RateModel | None, fl: Fleet) -> Section:
    if fl.basis == SIMULATED:
        return _simulated(c, rm, fl)
    if fl.basis == LITTLE:
        assert rm is not None
        return _arrival(c, rm, fl)
    return _buckets(c, fl)


def _cost_rows(fl: Fleet) -> list[list[str]]:
    return ([["$ per million output tokens", usd(fl.without.cost_per_mtok_usd), usd(fl.with_.cost_per_mtok_usd)]]
            if fl.without.cost_per_mtok_usd is not None else [])


def _no_price(c: Ctx) -> list[str]:
    return [] if c.s.gpu_hour_usd is not None else [
        "", "The scenario gives no `gpu_hour_usd`, so there are no dollar figures; add it to get cost per million "
        "tokens."]


def _costs(fl: Fleet) -> tuple[list[float] | None, list[float] | None]:
    w, s = fl.without.cost_per_mtok_usd, fl.with_.cost_per_mtok_usd
    return ([w], [s]) if w is not None and s is not None else (None, None)


def _simulated(c: Ctx, rm: RateModel | None, fl: Fleet) -> Section:
    """A fleet sized by simulation: its replicas, rate per replica and price; the analytic ceiling explained."""
    sv = c.plan.serving
    assert sv is not None
    gpus = f"{sv.gpus_per_replica} GPU{'s' if sv.gpus_per_replica > 1 else ''}"
    rows = [["replicas at the target rate (GPUs)", f"{fl.without.gpus / sv.gpus_per_replica:g} "
             f"({fl.without.gpus:g})", f"{fl.with_.gpus / sv.gpus_per_replica:g} ({fl.with_.gpus:g})"],
            ["requests/s one replica serves within the SLO", f"{fl.without.rate_rps:.3g}", f"{fl.with_.rate_rps:.3g}"],
            *_cost_rows(fl)]
    slo = sv.slo
    text = [f"Sized by simulation (the scenario's `objective: slo`): the fewest replicas of {gpus} whose seeded "
            f"requests ({sv.requests:,}, split evenly over the replicas) meet the {slo.percentile:g}th-percentile "
            f"SLOs (TTFT <= {slo.ttft_ms:g} ms, TPOT <= {slo.tpot_ms:g} ms) at {fl.load}. **Size the fleet on "
            "these figures**; the cost of a token is that fleet's GPU-hours over the tokens it serves.", "",
            md_table(["", "without speculation", f"with speculation ({fl.with_.label})"], rows, "lrr")]
    if fl.ceiling is not None and rm is not None:
        b, s_ = fl.ceiling
        text += ["", f"The analytic model (Little's law on mean lengths, each request's prefill included) puts one "
                 f"replica's ceiling at {b:.3g} requests/s without speculation and {s_:.3g} with at a mean time per "
                 f"output token of {rm.slo_ms:g} ms: more than the simulation finds, because it holds the SLO on the "
                 "mean at steady arrivals, where the simulation holds it at the percentile with the scenario's "
                 "bursty arrivals and spread of prompt and output lengths. It bounds what a replica can do; it is "
                 "not what to size a fleet on."]
    text += _no_price(c)
    cb, cs = _costs(fl)
    fig = fg.capacity([fl.load], [fl.without.gpus], [fl.with_.gpus], cb, cs,
                      "GPUs that meet the SLO (simulated)", c.title, "target arrival rate (requests/s)", [fl.load])
    return Section("Capacity and cost", "\n".join(text), fig, "capacity",
                   "GPUs that meet the SLO and cost per million tokens, by simulation")


def _arrival(c: Ctx, rm: RateModel, fl: Fleet) -> Section:
    """An arrival rate: per-replica capacity within the SLO by Little's law (prefill included), replicas as the
    rate grows, the price of a token at a replica's capacity."""
    s = c.s
    a = s.arrival
    assert a is not None
    none = make_draft("none", s.model)
    labels = [f"{a.rate_rps * m:g} req/s" for m in RATE_MULTIPLES]
    g_base = [replicas_needed(c.t, none, 0, a, rm.slo_ms, a.rate_rps * m, fl.without.rate_rps or 0.0) * s.gpus
              for m in RATE_MULTIPLES]
    k = fl.with_.k
    g_spec = [replicas_needed(c.t, fl.with_.draft or none, k, a, rm.slo_ms, a.rate_rps * m,
                              fl.with_.rate_rps or 0.0) * s.gpus for m in RATE_MULTIPLES]
    rows = [["requests/s one replica serves within the SLO", f"{fl.without.rate_rps:.3g}", f"{fl.with_.rate_rps:.3g}"]]
    rows += [[f"GPUs for {lab}", f"{gb:g}", f"{gs:g}"] for lab, gb, gs in zip(labels, g_base, g_spec, strict=True)]
    rows += _cost_rows(fl)
    slo_text = (f"the SLO of {rm.slo_ms:g} ms/token" if s.slo_ms_per_token is not None else
                f"an **assumed** latency target of {rm.slo_ms:.2f} ms/token: the scenario gives no "
                "`slo_ms_per_token`, so the target is what plain decoding achieves on one replica at the scenario's "
                "rate")
    gpus = f"{s.gpus} GPU{'s' if s.gpus > 1 else ''}"
    text = [f"A replica is {gpus}; requests are split evenly over replicas, and each replica's per-token latency at "
            f"its Little's-law concurrency, every request's prefill included, must meet {slo_text}. With speculation "
            f"the replica runs the plan's configuration ({fl.with_.label}; the policy over the load shows where "
            "another k would carry more). The cost of a token is a replica's GPU-hours over the tokens it serves at "
            "that SLO-bound rate.", "",
            md_table(["", "without speculation", f"with speculation ({fl.with_.label})"], rows, "lrr")]
    text += _no_price(c)
    cb, cs = _costs(fl)
    fig = fg.capacity(labels, g_base, g_spec, cb, cs, "GPUs to serve the rate within the SLO", c.title,
                      "arrival rate, the scenario's and multiples (requests/s)", ["a replica at its SLO-bound rate"],
                      "load of each replica (requests/s)")
    return Section("Capacity and cost", "\n".join(text), fig, "capacity",
                   "GPUs needed and cost per million tokens as traffic grows")


def _speedup_band(c: Ctx, r: dict[str, Any]) -> tuple[float, float]:
    """A bucket row's speedup at its 80% band's ends (its draft's acceptance band and the engine's spread)."""
    import numpy as np

    from specsim.step.bands import spread_for, step_bands

    d = next((x for x in c.s.drafts if x.label == r["draft"]), None)
    tau, sp = float(r["tokens_per_step"]), float(r["speedup"])
    if d is None or not r["k"]:
        return sp, sp
    lo, hi = d.tau_band(int(r["k"]), tau, exact=not r.get("num_draft_tokens"))
    b = step_bands({"tokens_per_step": np.array([tau]), "speedup": np.array([sp])}, np.array([lo]), np.array([hi]),
                   c.s.engine.name, spread_for(c.s.engine.name, c.s.calibration), banded={"speedup": (1, "speedup")})
    return float(b.low["speedup"][0]), float(b.high["speedup"][0])


def _buckets(c: Ctx, fl: Fleet) -> Section:
    """Load buckets: GPU-equivalents at the baseline's token rate per bucket, and the price of a token over the
    day."""
    tp = c.s.gpus  # GPUs of one replica
    multi = any(len(bp.bucket.contexts) > 1 for bp in c.plan.buckets)
    rows, labels, g_base, g_spec = [], [], [], []
    for r in c.data["buckets"]:
        thr, base = r["throughput_tok_s"], r["baseline_throughput_tok_s"]
        labels.append(row_label(r, multi))
        g_base.append(float(tp))
        g_spec.append(tp * base / thr)
        lo, hi = _speedup_band(c, r)
        row = [labels[-1], r["batch"], f"{base:,.0f}", f"{thr:,.0f}", f"{tp:g}",
               f"{tp * base / thr:.2f} ({tp / hi:.2f}-{tp / lo:.2f})" if r["k"] else f"{tp:g}"]
        if c.s.slo_ms_per_token is not None:
            row += ["yes" if r["ms_per_token"] <= c.s.slo_ms_per_token else "**no**"]
        rows.append(row)
    header = ["bucket", "batch", "tok/s without", "tok/s with", "GPUs without", "GPUs with (80% band)"]
    if c.s.slo_ms_per_token is not None:
        header += [f"meets {c.s.slo_ms_per_token:g} ms/token"]
    text = [f"The token rate each bucket needs is taken as what plain decoding delivers there (one replica of "
            f"{tp} GPUs at the bucket's batch); with speculation the same rate takes {tp} x baseline / speculative "
            "throughput GPUs (GPU-equivalents at the same batch per replica; whole replicas come in steps of "
            f"{tp}).", "", md_table(header, rows), ""]
    g_lo, g_hi = gain_band(c.plan) if c.plan.speculates else (c.plan.gain, c.plan.gain)
    band = f"{fl.with_.gpus * c.plan.gain / g_hi:.2f}-{fl.with_.gpus * c.plan.gain / g_lo:.2f}"
    if c.s.gpu_hour_usd is not None:
        text += [f"Over the day: **{usd(fl.without.cost_per_mtok_usd)} per million output tokens without "
                 f"speculation, {usd(fl.with_.cost_per_mtok_usd)} with** (at ${c.s.gpu_hour_usd:g} per GPU-hour; "
                 f"{fl.with_.gpus:.2f} GPU-equivalents with speculation (80% band {band}) for each "
                 f"{fl.without.gpus:g} without, at the day's mean token rates)."]
    else:
        text += _no_price(c)[1:]
    cb, cs = _costs(fl)
    fig = fg.capacity(labels, g_base, g_spec, cb, cs, "GPUs to carry the baseline's token rate", c.title,
                      cost_labels=["over the day"], cost_xlabel="load (the day's mean tokens/s)")
    return Section("Capacity and cost", "\n".join(text), fig, "capacity",
                   "GPUs and cost per million tokens with and without speculation")


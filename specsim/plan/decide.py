"""The per-bucket decision: each draft's best configuration in every load bucket, the draft whose
load-weighted objective is best, and the memory check every plan starts from."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specsim.drafts.build import make_draft
from specsim.drafts.draft import Draft
from specsim.errors import SpecsimError
from specsim.plan.candidates import Evaluated, evaluate_draft, pick_k, score_configs
from specsim.plan.result import PointMetrics
from specsim.scenario.scenario import Bucket, Scenario
from specsim.step.evaluate import Target, memory_per_gpu


def bucket_points(buckets: tuple[Bucket, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    batch, ctx, share, owner = [], [], [], []
    for i, b in enumerate(buckets):
        for c, s in b.contexts:
            batch.append(b.batch)
            ctx.append(c)
            share.append(s)
            owner.append(i)
    return np.array(batch, float), np.array(ctx, float), np.array(share), np.array(owner)


def rows_at(ev: Evaluated, c: int, idx: np.ndarray, batch: np.ndarray, ctx: np.ndarray, share: np.ndarray
            ) -> tuple[PointMetrics, ...]:
    """Configuration c's figures at the points idx (one bucket's contexts)."""
    return tuple(ev.point(c, int(i), batch[i], ctx[i], share[i]) for i in idx)


def require_fit(s: Scenario, t: Target, batch: np.ndarray, ctx: np.ndarray, labels: list[str]) -> None:
    """SpecsimError (naming the scenario and the load point) unless plain decoding fits in memory at every
    (batch, context): a configuration that does not fit is never planned, and never reported as a speedup."""
    mem = memory_per_gpu(t, make_draft("none", s.model), 0, batch, ctx)
    ok = np.broadcast_to(np.asarray(mem.fits, bool), np.shape(batch))
    if ok.all():
        return
    i = int(np.flatnonzero(~ok)[0])
    total = float(np.broadcast_to(mem.total, np.shape(batch))[i]) / 2**30
    cap = float(np.broadcast_to(mem.capacity, np.shape(batch))[i]) / 2**30
    raise SpecsimError(f"{s.path}: {s.model.name} on {s.where} ({s.weight_dtype} weights) does not "
                       f"fit: {total:.1f} GiB needed of {cap:.1f} GiB per GPU at {labels[i]}, even without "
                       "speculation; lower the batch or context, raise tp, or use fp8 weights / KV cache")


@dataclass(frozen=True)
class Decision:
    """The bucket decisions for a set of drafts: the best draft, its per-bucket configuration, totals."""

    best: int  # index into drafts
    evs: tuple[Evaluated, ...]
    choices: tuple[tuple[int, ...], ...]  # per draft, per bucket: the configuration index
    totals: tuple[float, ...]


def objective_total(s: Scenario, ev: Evaluated, choice: list[int] | tuple[int, ...], owner: np.ndarray,
                     share: np.ndarray) -> float:
    total = 0.0
    for i, b in enumerate(s.buckets):
        idx = np.flatnonzero(owner == i)
        c = choice[i]
        if s.objective != "latency":
            total += b.weight * float((ev.values["throughput_tok_s"][c, idx] * share[idx]).sum())
        else:
            total -= b.weight * float((ev.values["ms_per_token"][c, idx] * share[idx]).sum())
    return total


def bucket_choices(s: Scenario, values: dict[str, np.ndarray], feasible: np.ndarray, share: np.ndarray,
                   owner: np.ndarray) -> list[int]:
    """Per bucket, the configuration (index into the values' first axis) the objective prefers over the
    bucket's points; 0 (plain decoding) where nothing fits."""
    choice = []
    for i in range(len(s.buckets)):
        idx = np.flatnonzero(owner == i)
        sc = score_configs({f: v[:, idx] for f, v in values.items()}, feasible[:, idx], share[idx], s.objective,
                           s.slo_ms_per_token)
        choice.append(max(pick_k(sc), 0))
    return choice


def decide(s: Scenario, t: Target, drafts: list[Draft], batch: np.ndarray, ctx: np.ndarray, share: np.ndarray,
           owner: np.ndarray) -> Decision:
    """Each draft's per-bucket choice and load-weighted total; the best draft by that total."""
    evs, choices, totals = [], [], []
    for d in drafts:
        ev = evaluate_draft(t, d, s.max_k, batch, ctx)
        choice = bucket_choices(s, ev.values, ev.feasible, share, owner)
        evs.append(ev)
        choices.append(tuple(choice))
        totals.append(objective_total(s, ev, choice, owner, share))
    best = int(np.argmax(totals))
    return Decision(best, tuple(evs), tuple(choices), tuple(totals))


def target_of(s: Scenario) -> Target:
    engine = getattr(s, "engine", None)
    extra = {"engine": engine} if engine is not None else {}
    return Target(s.hardware, s.model, s.tp, s.weight_dtype, s.kv_dtype, s.memory_utilization, **extra,
                  layout=getattr(s, "layout", None), calibration=getattr(s, "calibration", None))


def prior_notes(drafts: list[Draft] | tuple[Draft, ...], chosen: Draft | None) -> tuple[list[str], list[str]]:
    """(notes, details) wherever a prior decided the recommendation: one short line per prior-based draft (the
    notes a person reads under the answer) and each draft's acceptance note in full, its prior's id, source, band
    and how to measure (the details: `plan --details`, the JSON, the report)."""
    notes, details = [], []
    for d in drafts:
        if not d.acceptance.prior and not d.acceptance.note:
            continue  # measured to the depth planned: nothing to flag
        mine = chosen is not None and d.label == chosen.label
        if d.acceptance.prior:
            notes.append(f"acceptance of {d.label} is a sourced prior, not a measurement: measure yours before "
                         + ("relying on it" if mine else "relying on its comparison"))
        else:
            notes.append(f"acceptance of {d.label} is measured, and carried past the depth measured by a model")
        if d.acceptance.note:
            details.append(f"acceptance of {d.label}: {d.acceptance.note}")
    return notes, details

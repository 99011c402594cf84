"""Memory per GPU against capacity, as vLLM counts it, with and without speculation."""

from __future__ import annotations

from specsim.drafts.build import make_draft
from specsim.drafts.draft import Draft
from specsim.report.context import GIB, Ctx, Section, md_table, row_label
from specsim.report.figures import memory as fg
from specsim.step.evaluate import Target, memory_per_gpu


def _largest_batch(t: Target, d: Draft, k: int, context: float) -> int:
    one, two = (memory_per_gpu(t, d, k, b, context) for b in (1.0, 2.0))
    per_seq = float(two.total - one.total)
    fixed = float(one.total) - per_seq
    cap = float(one.capacity)
    return max(0, int((cap - fixed) // per_seq)) if per_seq > 0 else 0


def memory_section(c: Ctx) -> Section:
    s, t = c.s, c.t
    none = make_draft("none", s.model)
    labels: list[str] = []
    parts: dict[str, list[float]] = {p: [] for p in fg.MEMORY_PARTS}
    rows: list[list[object]] = []
    multi = any(len(bp.bucket.contexts) > 1 for bp in c.plan.buckets)
    for bp in c.plan.buckets:
        for r, base in zip(bp.rows, bp.baseline_rows, strict=True):
            d = c.draft_by_label(bp.draft)
            lab = row_label({"bucket": bp.bucket.name, "context": r.context}, multi)
            settings = [(f"{bp.draft} k={bp.k}", d, bp.k, r.batch)] if d is not None and bp.k else []
            settings.append(("no speculation", none, 0, base.batch))
            for name, dd, k, b in settings:
                m = memory_per_gpu(t, dd, k, b, r.context)
                labels.append(f"{lab}, B={b}: {name}")
                for p in fg.MEMORY_PARTS:
                    parts[p].append(float(getattr(m, p)) / GIB)
                total = float(m.total) / GIB
                rows.append([lab, f"{r.context:,}", name, b, f"{float(m.weights) / GIB:.1f}",
                             f"{float(m.kv_cache) / GIB:.1f}",
                             f"{(float(m.activations) + float(m.reserved)) / GIB:.1f}",
                             f"{(float(m.draft_weights) + float(m.draft_kv)) / GIB:.2f}", f"{total:.1f}",
                             "yes" if bool(m.fits) else "**no**",
                             _largest_batch(t, dd, k, r.context)])
    total_gib = t.hardware.total_memory_bytes / GIB
    cap = total_gib * t.memory_utilization
    fig = fg.memory(labels, parts, cap, total_gib, c.title)
    text = (f"Per GPU, with weights split over tp = {t.tp} and {s.kv_dtype} KV cache, counted as vLLM counts it: "
            f"usable is {s.memory_utilization:.0%} (`gpu_memory_utilization`) of {total_gib:.1f} GiB = {cap:.1f} GiB, "
            "from which the weights, the activation peak of a profiling pass and the non-torch / CUDA-graph "
            "reserves come before the KV cache. Speculation adds the draft's weights and KV cache and the verified "
            "tokens' KV slots.\n\n"
            + md_table(["bucket", "context", "setting", "batch", "weights GiB", "KV cache GiB",
                         "activations + reserves GiB", "draft GiB", "total GiB", "fits", "largest batch that fits"],
                        rows, "lrlrrrrrrlr"))
    return Section("Memory", text, fig, "memory", "Weights, KV cache, reserves and draft footprint against capacity")

"""The hardware profile's provenance, its fit against the reference timings where present, and every
assumption the report makes."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from specsim.report.context import GIB, Ctx, Section, md_table

REFERENCE_DIR = Path(__file__).resolve().parents[3].parent / "shared" / "reference" / "vidur"


def profile_kind(source: str, provenance: Mapping[str, Any] | None = None) -> str:
    """How a profile's efficiency parameters were made, read from the way its `efficiency.source` text
    begins ("fitted by ...", "transferred from ...", "measured by `specsim bench` ...") and from the
    structured `provenance.fitted_by` the calibration commands write. Only the opening counts: a fitted
    profile's source may say further on that one of its fields was transferred from another fit."""
    start = " ".join(source.split()).lower()
    if start.startswith("transferred"):
        return "transferred from a profile fitted on another GPU (an estimate)"
    if (provenance or {}).get("fitted_by") or start.startswith(("fitted", "calibrated", "refitted")):
        return "fitted to measured kernel timings"
    if start.startswith("measured"):
        return "peaks measured on this machine with default efficiencies (not fitted)"
    return "datasheet figures and default efficiencies (not fitted)"


def fit_quality(hw_name: str, reference: Path | None) -> str:
    """MAPE of the profile against the reference timings for its GPU: measured now when `reference` is
    given (`specsim report --reference DIR`), else quoted from the profile's own fit record (in-sample)."""
    from specsim.cost.hardware import load_hardware

    if reference is None:
        hw = load_hardware(hw_name)
        return (f"Fit record of this profile (in-sample; `specsim report --reference DIR` measures it again "
                f"against a folder of reference timings): {hw.efficiency.source.strip()}")
    from specsim.calibration.vidur import VIDUR_DEVICES, import_vidur
    from specsim.cost.measurements import mape_by, predict_rows, token_band  # pandas: only to measure
    root = reference
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
    per = ", ".join(f"{b}: {v:.1f}%" for b, v in bands.items()) if hasattr(bands, "items") else ""
    return (f"Against {len(rows):,} measured linear-layer timings for this GPU (Vidur, all models, tp 1-8): mean "
            f"absolute error **{overall:.1f}%**; by tokens per GEMM {per}.")


def provenance_section(c: Ctx, reference: Path | None) -> Section:
    s, hw = c.s, c.s.hardware
    eff = hw.efficiency
    kind = profile_kind(eff.source, hw.provenance)
    lines = [f"**{hw.name}**: {hw.description}. Efficiency parameters are **{kind}**: "
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
    lines += [md_table(["profile field", "value"], prow, "ll"), "", "### Assumptions", ""]
    a = [f"Every number is a model prediction from the roofline cost model (`specsim forward`) and the acceptance "
         f"model, not a measurement; hardware profile `{Path(hw.source_path).name or hw.name}`.",
         f"Target {s.model.name}: {s.model.n_params() / 1e9:.1f} B parameters, {s.weight_dtype} weights, "
         f"{s.kv_dtype} KV cache, {s.where}; {s.memory_utilization:.0%} of GPU memory usable.",
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

"""Refit the bundled profiles' own (vLLM's) W8A8 fp8 GEMM parameters (issue 22) and write them back.

On top of each profile's bf16 tile model, fit `tables.FP8_PARAMS` (the fp8 tile rate, the activation quantisation's
fixed and per-token costs) to NVIDIA's vLLM fp8 GEMM tables with the held-out scheme of `specsim calibrate-tables`,
running vLLM's fixed CUTLASS dispatch on Hopper (`gemm_dispatch`), and rewrite those lines of the profile, its
`gemm_dispatch` and the fp8 figures of its `source`; the profiles that state they carry another's fit (`COPIES`)
take its values:

    python tools/fp8_gemm.py [--gpus h100-sxm,h200]
"""

from __future__ import annotations

import argparse
import re
import textwrap

import yaml

from specsim.calibration import tables as tab
from specsim.cost.hardware import load_hardware, profiles_dir

GPUS = ("h100-sxm", "h200", "b200", "gb200", "b300", "gb300", "l40s", "rtx-pro-6000")
COPIES = {"h100-pcie": "h100-sxm", "h800": "h100-sxm", "rtx-5090": "rtx-pro-6000"}  # their sources say so
COMMENTS = {"fp8_compute": "fp8 tile rate relative to gemm_compute x fp8 peak",
            "quant_overhead_us": "fixed cost the fp8 activation quantisation adds per GEMM",
            "quant_row_ns": "per token of the activation quantisation (vLLM: one thread block a token)"}


def _held_fp8(report) -> float:  # type: ignore[no-untyped-def]
    r = report[(report["op"] == "gemm") & (report["group"] == "fp8 all") & (report["rows"] == "held-out")]
    return float(r["mape_pct"].iloc[0])


def fit(gpu: str) -> tuple[dict[str, float], dict[str, str], float, float]:
    """(fitted parameters, dispatch, held-out fp8 error before, after)."""
    base = tab.framework_kernels(load_hardware(gpu), "vllm")
    rows = tab.load_rows(gpu, "vllm")
    before = _held_fp8(tab.score(load_hardware(gpu), rows))
    fitted = tab.fit_to_tables(base, rows, stages=("fp8",))
    values = {p: float(f"{getattr(fitted.efficiency, p):.4g}") if getattr(fitted.efficiency, p) > 1e-6 else 0.0
              for p in tab.FP8_PARAMS}
    return values, dict(base.gemm_dispatch), before, _held_fp8(tab.score(fitted, rows))


def _source(gpu: str) -> str:
    return str(yaml.safe_load((profiles_dir() / f"{gpu}.yaml").read_text())["efficiency"].get("source", ""))


def write(gpu: str, values: dict[str, float], dispatch: dict[str, str], note: str | None) -> None:
    path = profiles_dir() / f"{gpu}.yaml"
    text = path.read_text()
    text = re.sub(r"\n  (quant_overhead_us|quant_row_ns): .*", "", text)
    lines = "".join(f"\n  {p}: {v:g}  # {COMMENTS[p]}" for p, v in values.items())
    text = re.sub(r"\n  fp8_compute: .*", lambda _: lines, text, count=1)
    text = re.sub(r"\ngemm_dispatch:.*(\n  .*)*", "", text)
    if dispatch:
        body = "".join(f"\n  {d}: {n}  # {n.split('_')[0]}'s CUTLASS sm90 fp8 dispatch (gemm_dispatch.py: its source)"
                       for d, n in dispatch.items())
        head = "\ngemm_dispatch:  # the engine's fixed fp8 GEMM tiles (gemm_dispatch.py)"
        text = text.replace("\nefficiency:", f"{head}{body}\nefficiency:", 1)
    if note is not None:
        source = yaml.safe_load(text)["efficiency"]["source"]
        source = re.sub(r"\s*fp8 GEMM refit \(issue 22\):[^;]*(;|$)", "", source).rstrip(".; ")
        wrapped = textwrap.fill(f"{source}; fp8 GEMM refit (issue 22): {note}", width=116, initial_indent="    ",
                                subsequent_indent="    ", break_on_hyphens=False)
        text = re.sub(r"(\n  source: >-\n)((    .*\n)+)", lambda m: m.group(1) + wrapped + "\n", text, count=1)
    path.write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--gpus", default=",".join(GPUS))
    args = ap.parse_args()
    fits = {}
    for gpu in [g for g in args.gpus.split(",") if g]:
        values, dispatch, before, after = fit(gpu)
        was = re.search(r"fp8 GEMM refit \(issue 22\):.*?held-out\s+error\s+(\d+\.\d)%", _source(gpu), re.S)
        before = float(was.group(1)) if was else before  # the figure before the first refit
        fits[gpu] = (values, dispatch)
        kind = "vLLM's sm90 CUTLASS dispatch" if dispatch else "the best tile configuration"
        note = (f"{', '.join(values)} fitted on the fp8 rows with {kind}: held-out error {before:.1f}% -> "
                f"{after:.1f}%")
        write(gpu, values, dispatch, note)
        print(f"{gpu}: fp8 {before:.1f}% -> {after:.1f}% {values}", flush=True)
    for gpu, source in COPIES.items():
        if source in fits:
            write(gpu, *fits[source], f"takes {source}'s fp8 parameters and dispatch")
            print(f"{gpu}: {source}'s fp8 parameters", flush=True)


if __name__ == "__main__":
    main()

"""Fit each engine's own kernels (issue 22) and write them into the bundled hardware profiles.

For every bundled GPU whose NVIDIA tables (aiconfigurator-core, read through the package) hold a framework's
kernels, fit the profile's efficiencies and in-graph all-reduce to that framework's tables, starting from the
profile's own (vLLM's) fit, with the same held-out scheme as `specsim calibrate-tables`, and write them as the
profile's `frameworks.<framework>` block (the last block of the file, replaced on every run):

    python tools/framework_kernels.py [--gpus h100-sxm,h200] [--frameworks sglang,trtllm]

Each block's `source` names the tables and the held-out errors of the fit.
"""

from __future__ import annotations

import argparse
import dataclasses
import re

import yaml

from specsim.calibration import tables as tab
from specsim.cost import aiconfigurator as aic
from specsim.cost.hardware import load_hardware, profiles_dir
from specsim.cost.hardware_profile import FrameworkKernels
from specsim.cost.hardware_yaml import framework_yaml

GPUS = ("h100-sxm", "h200", "b200", "gb200", "b300", "gb300", "a100-sxm-80gb", "l40s", "rtx-pro-6000")
FRAMEWORKS = ("sglang", "trtllm")
HEADER = ("# Each engine's own kernels (issue 22): this GPU's efficiencies and in-graph all-reduce fitted to NVIDIA's\n"
          "# tables of that framework by tools/framework_kernels.py (the profile's own are vLLM's); an engine of that\n"
          "# framework prices its passes with them (HardwareProfile.for_framework).\n")


def _held_out(report) -> str:  # type: ignore[no-untyped-def]
    def mape(op: str, group: str) -> str:
        row = report[(report["op"] == op) & (report["group"] == group)]
        return f"{float(row['mape_pct'].iloc[0]):.1f}%" if len(row) else "-"

    ar = report[(report["op"] == "allreduce") & report["group"].str.startswith("custom")]
    worst = f"{float(ar['mape_pct'].max()):.1f}%" if len(ar) else "-"
    return (f"held-out error: GEMM bf16 {mape('gemm', 'bf16 all')}, fp8 {mape('gemm', 'fp8 all')}; decode attention "
            f"(KV > 128) {mape('attention', 'decode kv>128 all')}; fused MoE {mape('moe', 'all')}; custom all-reduce "
            f"(in-sample, worst GPU count) {worst}")


def _round(x: float) -> float:
    return float(f"{x:.4g}")


def fit(gpu: str, framework: str) -> FrameworkKernels | None:
    base = load_hardware(gpu)
    base = dataclasses.replace(base, frameworks={})
    rows = tab.load_rows(base.name, framework)
    if all(getattr(rows, op).empty for op in ("gemm", "attention", "moe", "allreduce")):
        return None
    fitted, report, rows = tab.calibrate_to_tables(base, framework)
    custom = fitted.interconnect.allreduce_by_implementation.get("custom")
    tables = re.search(r"\((aiconfigurator-core[^)]*)\)", tab.source_line(rows, report, aic.installed_version()))
    source = f"fitted to NVIDIA's {framework} tables ({tables.group(1) if tables else framework}); " + _held_out(report)
    eff = dataclasses.replace(fitted.efficiency, source="",
                              **{f.name: _round(getattr(fitted.efficiency, f.name))
                                 for f in dataclasses.fields(fitted.efficiency) if f.name != "source"})
    if custom:
        custom = {n: (_round(a), _round(b), _round(c)) for n, (a, b, c) in custom.items()}
    kernel = fitted.attention_kernel if fitted.attention_kernel != base.attention_kernel else ""
    dispatch = fitted.gemm_dispatch if fitted.gemm_dispatch != base.gemm_dispatch else None
    return FrameworkKernels(eff, {"custom": custom} if custom and not rows.allreduce.empty else {}, source, kernel,
                            dispatch)


def _rounded(x: object) -> object:
    if isinstance(x, float):
        return _round(x)
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    return x


def write(gpu: str, blocks: dict[str, FrameworkKernels]) -> None:
    path = profiles_dir() / f"{gpu}.yaml"
    text = path.read_text()
    text = re.split(r"\n(?:# Each engine's own kernels|frameworks:\n)", text, maxsplit=1)[0].rstrip("\n") + "\n"
    if blocks:
        body = yaml.safe_dump(_rounded({"frameworks": {n: framework_yaml(k) for n, k in sorted(blocks.items())}}),
                              sort_keys=False, width=112, default_flow_style=False)
        text += "\n" + HEADER + body
    path.write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--gpus", default=",".join(GPUS))
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    args = ap.parse_args()
    for gpu in [g for g in args.gpus.split(",") if g]:
        blocks = {}
        for fw in [f for f in args.frameworks.split(",") if f]:
            k = fit(gpu, fw)
            if k is not None:
                blocks[fw] = k
                print(f"{gpu} {fw}: {k.source.split('; held-out error: ')[-1]}", flush=True)
        write(gpu, blocks)


if __name__ == "__main__":
    main()

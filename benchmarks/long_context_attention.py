"""Long-context attention (KV >= 16k) against NVIDIA's kernel tables, per GPU and framework (issue 33); not part of
the test run. Needs the tables extra (pip install -e ".[tables]"); about a minute on 2 cores.

    python benchmarks/long_context_attention.py [--gpus h100-sxm,h200] [--min-kv 16384] [--json PATH]

Prints the median / p90 |error| and the median bias of specsim's attention time per (GPU, framework, family):
decode q = 1 (GQA / MHA), MLA decode q = 1 per KV dtype, and prefill (context rows, isl >= min-kv); then the count of
generation rows with q > 1 (none in aiconfigurator-core 0.12: verification has no measured row), and the 131k-token
prefill of DeepSeek-V3 on 8 GPUs (one pass and 16 chunks of 8k) in the MLA prefill form the engines run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from specsim.calibration import long_context as lc
from specsim.cost.forward import forward_time_s
from specsim.cost.hardware import load_hardware
from specsim.cost.model import load_model


def prefill_131k(gpus: tuple[str, ...] = ("h100-sxm", "h200", "b200")) -> list[dict[str, float | str]]:
    """Seconds of a 131,072-token prefill of DeepSeek-V3 (fp8 block weights, tp 8): one pass, and 16 chunks of 8,192
    tokens each over its growing prefix (chunked prefill)."""
    model = load_model("deepseek-v3")
    out: list[dict[str, float | str]] = []
    for gpu in gpus:
        hw = load_hardware(gpu)
        one = float(np.asarray(forward_time_s(hw, model, 1, 131072, 131072, tp=8, weight_dtype="fp8_block")))
        chunks = forward_time_s(hw, model, 1, 8192, np.arange(1, 17) * 8192.0, tp=8, weight_dtype="fp8_block")
        out.append({"gpu": gpu, "one_pass_s": one, "chunked_8k_s": float(np.sum(chunks))})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", default=",".join(lc.GPUS))
    ap.add_argument("--min-kv", type=float, default=lc.LONG_KV)
    ap.add_argument("--json", type=Path, help="also write the results to this JSON file")
    args = ap.parse_args()
    gpus = tuple(g for g in args.gpus.split(",") if g)
    table = lc.long_context_table(gpus, lc.FRAMEWORKS, args.min_kv)
    print(f"attention at KV >= {args.min_kv:g} vs NVIDIA's tables (|error| median / p90, median bias, %)")
    print(table.round(1).to_string(index=False))
    q_gt1 = {f"{g} {fw}": lc.q_gt1_rows(g, fw) for g in gpus for fw in lc.FRAMEWORKS
             if ((table["gpu"] == g) & (table["framework"] == fw)).any()}
    print(f"\ngeneration rows with q > 1 (verification widths timed): {sum(q_gt1.values())} "
          f"over {len(q_gt1)} GPU x framework tables")
    pre = prefill_131k()
    print("\n131k-token prefill, DeepSeek-V3 fp8 on 8 GPUs (tp 8):")
    for r in pre:
        print(f"  {r['gpu']:10s} one pass {r['one_pass_s']:6.1f} s   16 x 8k chunks {r['chunked_8k_s']:6.1f} s")
    if args.json:
        args.json.write_text(json.dumps({"min_kv": args.min_kv, "groups": table.to_dict(orient="records"),
                                         "q_gt1_rows": q_gt1, "prefill_131k": pre}, indent=1))


if __name__ == "__main__":
    main()

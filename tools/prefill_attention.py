"""Fit the prefill-attention parameters of each bundled GPU and framework to NVIDIA's tables and write them into the
profiles (issue 33's long-context floor).

Prefill attention (context rows, q = L) is priced as its kernels run (attention.attention_time_s): the causal
triangle plus half a KV block per row (`tile_keys`), the matmuls at `attention_compute` of the tensor-core peak,
the softmax's exps on the MUFU units (`attention_softmax_ops` slots a score, `softmax_s`), the query tiles' makespan
(`prefill_makespan`) and a cost per wave of query tiles (`attention_prefill_cta_us`). Those three parameters are
fitted here, per GPU and framework (the profile's own block: vLLM; `frameworks.<fw>`: SGLang, TensorRT-LLM), on
the framework's prefill rows with KV < 16k whose head configuration `calibrate-tables` does not hold out; the rows
with KV >= 16k (benchmarks/long_context_attention.py) and the held-out head configurations are not fitted.

    python tools/prefill_attention.py [--gpus h100-sxm,h200] [--frameworks vllm,sglang,trtllm] [--dry-run]
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np

from specsim.calibration import long_context as lc
from specsim.calibration import tables as tab
from specsim.calibration.efficiency import fit_efficiency_params
from specsim.cost.hardware import load_hardware
from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.measurements import RowSet
from specsim.errors import SpecsimError

FIT_MAX_KV = lc.LONG_KV  # rows at or above it are the long-context benchmark's: scored, never fitted
COMMENTS = {
    "attention_compute": "attention matmuls: fraction of dense peak (prefill rows, tools/prefill_attention.py)",
    "attention_softmax_ops": "MUFU slots a score's softmax spends beside the matmuls (prefill rows)",
    "attention_prefill_cta_us": "cost of one wave of prefill query-tile CTAs (prefill rows)",
}


def fit(gpu: str, framework: str) -> tuple[dict[str, float], str] | None:
    """(fitted values, a note of the fit's errors) of `tab.PREFILL_PARAMS` for one GPU and framework."""
    hw = lc.framework_profile(gpu, framework)
    try:
        rows = tab.load_rows(gpu, framework)
    except SpecsimError:
        return None
    att, held = rows.attention, rows.held("attention")
    pre = (att["framework"] == framework).to_numpy() & (att["q_per_seq"] > 1).to_numpy()
    train = att[pre & ~held & (att["context_len"] < FIT_MAX_KV).to_numpy()]
    if train.empty:
        return None
    fitted, _ = fit_efficiency_params(train, hw, list(tab.PREFILL_PARAMS), lenient=list(tab.PREFILL_PARAMS))
    # 4 significant figures; a value at its lower bound (the optimiser stops within 1e-6 of it) is written as 0
    values = {p: float(f"{v:.4g}") if (v := getattr(fitted.efficiency, p)) > 1e-6 else 0.0 for p in tab.PREFILL_PARAMS}
    long_ = att[pre & (att["context_len"] >= FIT_MAX_KV).to_numpy()]
    return values, f"fit {_err(fitted, train)}, KV >= 16k {_err(fitted, long_)}"


def _err(hw: HardwareProfile, d: object) -> str:
    rows = RowSet(d)  # type: ignore[arg-type]
    e = rows.predict_ms(hw) / d["time_ms"].to_numpy(float) - 1.0  # type: ignore[index]
    return f"{np.median(np.abs(e)) * 100:.1f}% (bias {np.median(e) * 100:+.1f}%)" if len(e) else "-"


def set_block(text: str, framework: str, values: dict[str, float]) -> str:
    """`text` (a profile's YAML) with `values` written into the efficiency block of `framework` (vLLM: the profile's
    own), each key replaced where it is there, else added after attention_compute."""
    if framework == "vllm":
        start, indent = re.search(r"^efficiency:.*$", text, re.M), "  "
    else:
        start, indent = re.search(rf"^  {framework}:\s*$", text, re.M), "      "
    if start is None:
        raise SpecsimError(f"no efficiency block of {framework}")
    head, body = text[:start.end()], text[start.end():]
    anchor = re.search(rf"^{indent}attention_compute:.*$", body, re.M)
    if anchor is None:
        raise SpecsimError(f"no attention_compute in {framework}'s block")
    comment = framework == "vllm"
    for key in reversed(tab.PREFILL_PARAMS):
        line = f"{indent}{key}: {values[key]:g}" + (f"  # {COMMENTS[key]}" if comment else "")
        block_end = _block_end(body, anchor.start(), indent)
        found = re.compile(rf"^{indent}{key}:.*$", re.M).search(body, anchor.start(), block_end)
        if found:
            body = body[:found.start()] + line + body[found.end():]
        else:
            body = body[:anchor.end()] + "\n" + line + body[anchor.end():]
        anchor = re.compile(rf"^{indent}attention_compute:.*$", re.M).search(body, anchor.start())
        assert anchor is not None
    return head + body


def _block_end(body: str, at: int, indent: str) -> int:
    """End of the mapping block (lines indented by at least `indent`) holding position `at`."""
    m = re.compile(rf"^(?!{indent})\S?.*$", re.M)
    for hit in m.finditer(body, at):
        if hit.group(0).strip() and not hit.group(0).startswith(indent):
            return hit.start()
    return len(body)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--gpus", default=",".join(lc.GPUS))
    ap.add_argument("--frameworks", default=",".join(lc.FRAMEWORKS))
    ap.add_argument("--dry-run", action="store_true", help="print the fits, write nothing")
    args = ap.parse_args()
    for gpu in (g for g in args.gpus.split(",") if g):
        path = Path(load_hardware(gpu).source_path)
        text = path.read_text()
        for fw in (f for f in args.frameworks.split(",") if f):
            if fw != "vllm" and fw not in load_hardware(gpu).frameworks:
                continue
            got = fit(gpu, fw)
            if got is None:
                continue
            values, note = got
            print(f"{gpu:14s} {fw:7s} {values}  {note}", flush=True)
            text = set_block(text, fw, values)
        if not args.dry_run:
            path.write_text(text)


if __name__ == "__main__":
    main()

"""An `evaluate` answer as one record: the keys evaluate's JSON and CSV give and the grid's columns add, defined
once, so a grid row answers with the same keys and the same figures as the flags.

The record is the question as asked (`asked`: the fields given, and the defaults that shaped the answer), the
step's figures, and the echo of what was priced: the model as resolved, its weights per part, the layout and GPUs,
the engine, the cost model (and how much of the step its tables priced), the draft's shape and where the
acceptance came from. None of the answer's keys is a field's name, so a grid keeps its input columns beside them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specsim.acceptance.chain import MEAN_LENGTH_CONVENTION
from specsim.advise.evaluate import RatioStep, RealStep
from specsim.fields import FIELDS, Given
from specsim.step.bands import BANDED, load_spread, step_bands

#: the step's figures (step/economics.py StepMetrics.as_dict)
METRICS = ("tokens_per_step", "step_ms", "draft_ms", "verify_ms", "overhead_ms", "baseline_step_ms", "speedup",
           "throughput_tok_s", "baseline_throughput_tok_s", "ms_per_token")
#: each banded figure's 10th and 90th percentile (step/bands.py)
BAND_KEYS = tuple(f"{name}_{end}" for name in BANDED for end in ("low", "high"))
#: what was priced, and what it needs
ECHO = ("priced_hardware", "priced_model", "priced_weights", "priced_kv_dtype", "priced_layout", "gpus",
        "priced_engine", "priced_cost_model", "table_share", "priced_draft", "verify_tokens_per_seq", "expected_k",
        "acceptance_source", "priced_calibration", "memory_gib_per_gpu", "memory_capacity_gib")
#: every key an answer may carry beyond the question, in order (a grid adds these columns, then `error`)
ANSWER = (*METRICS, *BAND_KEYS, *ECHO)
TEXT = ("priced_hardware", "priced_model", "priced_weights", "priced_kv_dtype", "priced_layout", "priced_engine",
        "priced_cost_model", "priced_draft", "acceptance_source", "priced_calibration")
assert not set(ANSWER) & set(FIELDS), "an answer key must not shadow a field"


def asked(g: Given) -> dict[str, Any]:
    """The question: each field the user gave, and the step's load (batch, context) given or not; the rest of
    what was priced is in the echo (ECHO)."""
    return {name: str(value) if FIELDS[name].kind == "path" else value for name, value in g.values.items()
            if g.given(name) or FIELDS[name].group == "load"}


def record(r: RealStep | RatioStep) -> dict[str, Any]:
    """The answer's keys (ANSWER) with this step's values; None where the route has none."""
    out: dict[str, Any] = dict.fromkeys(ANSWER)
    out.update({key: float(np.asarray(value)) for key, value in r.metrics.as_dict().items()})
    out["acceptance_source"] = r.acceptance
    if isinstance(r, RealStep):
        central = {name: np.asarray(value) for name, value in out.items() if name in BANDED}
        cal = r.calibration
        bands = step_bands(central, np.asarray(r.tau_band[0]), np.asarray(r.tau_band[1]), r.engine,
                           load_spread().fitted(r.engine, cal.sigma_log if cal else None))
        out.update({key: float(value) for key, value in bands.as_dict().items()})
        out.update(priced_hardware=r.hardware, priced_model=r.model, priced_weights=r.weights,
                   priced_kv_dtype=r.kv_dtype, priced_layout=r.layout, gpus=r.gpus, priced_engine=r.engine,
                   priced_cost_model=r.cost_model, priced_calibration=cal.label if cal else None,
                   table_share=None if np.isnan(r.table_share) else r.table_share,
                   priced_draft=f"{r.draft}: {r.shape}", verify_tokens_per_seq=r.verify_tokens_per_seq,
                   expected_k=r.expected_k, memory_gib_per_gpu=r.memory_gib, memory_capacity_gib=r.capacity_gib)
    else:
        shape = f"chain k={r.k}" if r.is_chain else f"tree of {r.tree.num_nodes} nodes, depth {r.tree.depth}"
        out.update(priced_draft=shape, priced_cost_model="abstract (seed chapter)",
                   verify_tokens_per_seq=float(r.tree.num_verify_tokens))
    return out


def notes(r: RealStep | RatioStep) -> dict[str, Any]:
    """What JSON adds beyond the record: the cost line, the acceptance's long note, the chain's rates."""
    out: dict[str, Any] = {"cost_source": r.cost_source, "convention": MEAN_LENGTH_CONVENTION}
    if isinstance(r, RealStep) and r.acceptance_note:
        out["acceptance_note"] = r.acceptance_note
    if isinstance(r, RealStep) and r.verify_path:
        out["verify_path"] = r.verify_path
    if isinstance(r, RatioStep) and r.chain_rates is not None:
        out["alpha_per_position"] = list(r.chain_rates)
    return out

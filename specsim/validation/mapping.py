"""Each published result as a configuration `plan.grid.evaluate_grid` can price, or the reason it cannot.

The row's own hardware, model, engine, draft, shape, batch and context are used as stated; what the
source leaves out comes from data/methods.yaml (the shape each published implementation runs, with
its source). Research loops that split a large model over several GPUs layer by layer (accelerate's
device_map, as the EAGLE and Medusa repositories do) run at single-GPU speed with the memory of all
GPUs: priced at tp = 1 without the one-GPU memory check.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specsim.cost.hardware import load_hardware
from specsim.cost.model import load_model
from specsim.errors import SpecsimError
from specsim.files import read_mapping

ENGINES = ("vllm", "sglang", "trtllm", "hf")
#: Prompt length assumed where a source gives none (chat benchmarks: MT-bench prompts plus the
#: tokens generated so far average a few hundred tokens; at batch 1 attention is a small share).
DEFAULT_CONTEXT = 512


@dataclass(frozen=True)
class Methods:
    methods: dict[str, dict[str, Any]]
    unsupported: dict[str, str]
    engines: dict[str, dict[str, Any]]
    unpriced_rows: dict[str, str]

    def engine_profile(self, engine: str, version: Any, group: str) -> str:
        """The engine profile a row ran on: by its group, then its stated version, then the default."""
        spec = self.engines.get(engine, {})
        if group in (spec.get("groups") or {}):
            return str(spec["groups"][group])
        text = str(version) if isinstance(version, str) else ""
        for prefix, profile in sorted((spec.get("versions") or {}).items(), key=lambda kv: -len(kv[0])):
            if text.startswith(str(prefix)):
                return str(profile)
        return str(spec.get("default", engine))


@lru_cache(maxsize=1)
def methods() -> Methods:
    path = Path(str(resources.files("specsim.validation"))) / "data" / "methods.yaml"
    data = read_mapping(path)
    return Methods(dict(data["methods"]), dict(data.get("unsupported") or {}), dict(data.get("engines") or {}),
                   dict(data.get("unpriced_rows") or {}))


@lru_cache(maxsize=64)
def _loads(kind: str, name: str) -> str:
    """'' if the name loads, else the reason."""
    try:
        (load_hardware if kind == "hardware" else load_model)(name)
    except SpecsimError as exc:
        return str(exc).split(" (known")[0]
    return ""


def _too_big(model: str, hardware: str) -> bool:
    """Weights in bf16 alone exceed one GPU's memory."""
    try:
        return load_model(model).n_params() * 2 > load_hardware(hardware).total_memory_bytes
    except SpecsimError:
        return False


def _size_b(model: str) -> float:
    try:
        return load_model(model).n_params() / 1e9
    except SpecsimError:
        return float("nan")


def _defaults(spec: dict[str, Any], row: pd.Series) -> dict[str, Any]:
    """The method's default shape for this row (by target size and group where the data says so)."""
    shape = dict(spec.get("tree") or spec.get("chain") or spec.get("lookahead") or {})
    by_size = spec.get("by_size") or {}
    groups = spec.get("by_size_groups")
    if by_size and (groups is None or row["group"] in groups):
        size = _size_b(str(row["model"]))
        for threshold in sorted(by_size, key=float):
            if np.isfinite(size) and size >= 0.8 * float(threshold):
                shape.update(by_size[threshold])
    return shape


def map_row(row: pd.Series) -> tuple[dict[str, Any] | None, str]:
    """(grid row, '') for a priceable published result, or (None, reason)."""
    engine = str(row["engine"]).strip().lower()
    if engine not in ENGINES:
        return None, f"engine '{engine}' is not modelled"
    if not np.isfinite(row["speedup"]):
        return None, "no speedup reported"
    m = methods()
    if str(row["id"]) in m.unpriced_rows:
        return None, m.unpriced_rows[str(row["id"])]
    draft = str(row["draft"]).strip().lower()
    if draft in m.unsupported:
        return None, m.unsupported[draft]
    if draft not in m.methods:
        return None, f"draft '{draft}' is not mapped"
    spec = m.methods[draft]
    hardware = str(row["hardware"]).strip()
    if hardware == "unknown":
        return None, "hardware not stated"
    for kind, name in (("hardware", hardware), ("model", str(row["model"]).strip())):
        if reason := _loads(kind, name):
            return None, reason
    shape = _defaults(spec, row)
    profile = m.engine_profile(engine, row.get("engine_version"), str(row["group"]))
    grid: dict[str, Any] = {"id": row["id"], "hardware": hardware, "model": str(row["model"]).strip(),
                            "engine": profile, "draft": spec["method"], "weight_dtype": "bf16", "kv_dtype": "bf16"}
    method = spec["method"]
    if method == "draft_model":
        name = row["draft_model"] if isinstance(row["draft_model"], str) else spec.get("default_draft", "")
        name = name.split(" (")[0].strip()  # "llama-3.1-8b (fp8)" -> "llama-3.1-8b"
        if not name or _loads("model", name):
            return None, f"draft model '{name or row['draft_model']}' is not in the catalogue"
        grid["draft"] = name
    k = row["k"] if np.isfinite(row["k"]) else shape.get("k")
    if k is None:
        return None, "draft length not stated and no default"
    grid["k"] = int(k)
    tree = str(row["shape"]).strip() == "tree" or ("tree" in spec and str(row["shape"]).strip() != "chain")
    if tree and "tree" in spec:
        grid["topk"] = int(row["topk"]) if np.isfinite(row["topk"]) else shape.get("topk", 1)
        ndt = row["num_draft_tokens"] if np.isfinite(row["num_draft_tokens"]) else shape.get("num_draft_tokens")
        grid["num_draft_tokens"] = int(ndt) if ndt is not None else None
    if method == "lookahead":
        grid["window"], grid["guesses"] = shape.get("window", 7), shape.get("guesses", 7)
    gpus = int(row["num_gpus"]) if np.isfinite(row["num_gpus"]) else 1
    tp = int(row["tp"]) if np.isfinite(row["tp"]) else 1
    # eager loops load models larger than one GPU with accelerate's device_map (the EAGLE / Medusa
    # repositories' from_pretrained(device_map="auto")): layers split over GPUs, run one after another
    pipeline = engine == "hf" and tp <= 1 and (gpus > 1 or _too_big(str(row["model"]), hardware))
    grid["tp"] = 1 if pipeline else max(tp, 1)
    grid["check_memory"] = not pipeline
    grid["batch"] = int(row["batch"]) if np.isfinite(row["batch"]) else 1
    grid["context"] = int(row["context"]) if np.isfinite(row["context"]) else DEFAULT_CONTEXT
    if np.isfinite(row["acceptance_length"]):
        grid["acceptance_length"] = float(row["acceptance_length"])
    # what the acceptance prior is looked up for (priors mode): the benchmark and the sampling temperature
    if isinstance(row.get("dataset"), str) and row["dataset"].strip():
        grid["task"] = row["dataset"].strip()
    if np.isfinite(row.get("temperature", np.nan)):
        grid["temperature"] = float(row["temperature"])
    return grid, ""


def to_grid(corpus: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series]:
    """(grid rows for the priceable results, the reason per unpriceable id)."""
    rows, reasons = [], {}
    for _, row in corpus.iterrows():
        grid, reason = map_row(row)
        if grid is None:
            reasons[row["id"]] = reason
        else:
            rows.append(grid)
    return pd.DataFrame(rows), pd.Series(reasons, dtype=object)

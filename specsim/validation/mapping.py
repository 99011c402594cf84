"""Each published result as a configuration `advise.grid.evaluate_grid` can price, or the reason it cannot.

The row's own hardware, model, engine, draft, shape, batch and context are used as stated; what the
source leaves out comes from data/methods.yaml (the shape each published implementation runs, with
its source). Research loops that split a large model over several GPUs layer by layer (accelerate's
device_map, as the EAGLE and Medusa repositories do) run at single-GPU speed with the memory of all
GPUs: priced as a layer split (cost/layout.py: pp stages, one microbatch).
Expert-parallel and DP-attention layouts come from the notes ("EP4TP2", `ep=8`, `dp=8`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TypedDict

import numpy as np
import pandas as pd

from specsim.cost.dtypes import check_precision
from specsim.cost.hardware import load_hardware
from specsim.cost.model import load_model
from specsim.errors import SpecsimError
from specsim.files import read_mapping

ENGINES = ("vllm", "sglang", "trtllm", "hf", "gpt-fast")
#: Prompt length assumed where a source gives none (chat benchmarks: MT-bench prompts plus the
#: tokens generated so far average a few hundred tokens; at batch 1 attention is a small share).
DEFAULT_CONTEXT = 512


class DraftShape(TypedDict, total=False):
    """The draft shape beyond k a grid row states: trees' width and size, lookahead's window."""

    topk: int
    num_draft_tokens: int | None
    window: int
    guesses: int


class Stated(TypedDict, total=False):
    """What a grid row takes from the source only where it states it."""

    acceptance_length: float  # the source's measured mean accepted length
    task: str  # the benchmark (priors mode looks the acceptance prior up by it)
    temperature: float


class GridRow(DraftShape, Stated):
    """A published result as a row `advise.grid.evaluate_grid` prices."""

    id: str
    hardware: str
    model: str
    engine: str  # the engine profile
    draft: str  # the specsim method, or the draft model's catalogue name
    weight_dtype: str
    kv_dtype: str
    k: int
    tp: int
    dp: int
    cp: int
    ep: int
    pp: int
    layer_split: bool
    check_memory: bool
    check_context: bool
    batch: int
    context: int


@dataclass(frozen=True)
class MethodSpec:
    """How a corpus draft name is priced: its specsim method and the shape its published implementation
    runs where a row does not state one (data/methods.yaml)."""

    method: str
    shape: Mapping[str, int]  # the tree's, chain's or lookahead's defaults (k, topk, num_draft_tokens ...)
    tree: bool  # the implementation drafts a tree
    by_size: tuple[tuple[float, Mapping[str, int]], ...]  # (target size in B, overrides), ascending size
    by_size_groups: tuple[str, ...] | None  # by_size applies to these groups' rows only (None: every row)
    default_draft: str  # draft models: the drafter a row that names none ran
    source: str


@dataclass(frozen=True)
class EngineVersions:
    """The engine profile a corpus engine's rows ran on: by the row's group, then by its stated version
    (the longest matching prefix), else the default."""

    groups: Mapping[str, str]
    versions: tuple[tuple[str, str], ...]  # (version prefix, profile), longest prefix first
    default: str


@dataclass(frozen=True)
class Methods:
    methods: dict[str, MethodSpec]
    unsupported: dict[str, str]
    engines: dict[str, EngineVersions]
    unpriced_rows: dict[str, str]

    def engine_profile(self, engine: str, version: object, group: str) -> str:
        """The engine profile a row ran on: by its group, then its stated version, then the default."""
        spec = self.engines.get(engine)
        if spec is None:
            return engine
        if group in spec.groups:
            return spec.groups[group]
        text = str(version) if isinstance(version, str) else ""
        for prefix, profile in spec.versions:
            if text.startswith(prefix):
                return profile
        return spec.default


def _mapping(raw: object, where: str) -> Mapping[object, object]:
    """A mapping of data/methods.yaml as parsed (None: empty)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise SpecsimError(f"data/methods.yaml: {where}: expected a mapping, got {raw!r}")
    return raw


def _shape(raw: object, where: str) -> dict[str, int]:
    out = {}
    for key, value in _mapping(raw, where).items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecsimError(f"data/methods.yaml: {where}.{key}: expected an integer, got {value!r}")
        out[str(key)] = value
    return out


def _method(name: str, raw: Mapping[object, object]) -> MethodSpec:
    where = f"methods.{name}"
    shape = raw.get("tree") or raw.get("chain") or raw.get("lookahead")
    by_size = _mapping(raw.get("by_size"), f"{where}.by_size")
    groups = raw.get("by_size_groups")
    return MethodSpec(str(raw["method"]), _shape(shape, where), "tree" in raw,
                      tuple((float(str(t)), _shape(by_size[t], f"{where}.by_size"))
                            for t in sorted(by_size, key=lambda t: float(str(t)))),
                      None if not isinstance(groups, list) else tuple(str(g) for g in groups),
                      str(raw.get("default_draft", "")), str(raw.get("source", "")))


def _engine(name: str, raw: Mapping[object, object]) -> EngineVersions:
    versions = _mapping(raw.get("versions"), f"engines.{name}.versions")
    return EngineVersions({str(g): str(p) for g, p in _mapping(raw.get("groups"), f"engines.{name}.groups").items()},
                          tuple(sorted(((str(v), str(p)) for v, p in versions.items()), key=lambda kv: -len(kv[0]))),
                          str(raw.get("default", name)))


@lru_cache(maxsize=1)
def methods() -> Methods:
    path = Path(str(resources.files("specsim.validation"))) / "data" / "methods.yaml"
    data = read_mapping(path)
    engines = _mapping(data.get("engines"), "engines")
    return Methods({str(k): _method(str(k), _mapping(v, f"methods.{k}"))
                    for k, v in _mapping(data["methods"], "methods").items()},
                   {str(k): str(v) for k, v in _mapping(data.get("unsupported"), "unsupported").items()},
                   {str(k): _engine(str(k), _mapping(v, f"engines.{k}")) for k, v in engines.items()},
                   {str(k): str(v) for k, v in _mapping(data.get("unpriced_rows"), "unpriced_rows").items()})


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


def _stages(model: str, hardware: str) -> int:
    """GPUs a device_map split needs where the source does not say: the fewest (1, 2, 4, 8) whose memory holds
    the bf16 weights with a tenth to spare."""
    need = load_model(model).n_params() * 2 * 1.1 / load_hardware(hardware).total_memory_bytes
    return next((n for n in (1, 2, 4, 8) if n >= need), 8)


#: A row's expert, data-parallel and context-parallel layout as its notes state it: "EP4TP2" (TensorRT-LLM's MoE
#: expert x tensor split), `ep=8` / `dp=8` (data-parallel attention groups) or `cp=4` (vLLM's decode context
#: parallelism, -dcp: each sequence's KV split over cp of the tp GPUs).
_EP_TP = re.compile(r"\bEP(\d+)TP(\d+)\b")
_LAYOUT_KEY = re.compile(r"\b(ep|dp|cp)=(\d+)\b")


def _layout_note(row: pd.Series, key: str) -> int:
    """The row's `ep`, `dp` or `cp` as its notes state it (1 where they state none)."""
    notes = str(row.get("notes", ""))
    stated = dict(_LAYOUT_KEY.findall(notes))
    if key in stated:
        return int(stated[key])
    found = _EP_TP.search(notes)
    return int(found.group(1)) if key == "ep" and found else 1


def _size_b(model: str) -> float:
    try:
        return load_model(model).n_params() / 1e9
    except SpecsimError:
        return float("nan")


def _defaults(spec: MethodSpec, row: pd.Series) -> dict[str, int]:
    """The method's default shape for this row (by target size and group where the data says so)."""
    shape = dict(spec.shape)
    if spec.by_size and (spec.by_size_groups is None or row["group"] in spec.by_size_groups):
        size = _size_b(str(row["model"]))
        for threshold, overrides in spec.by_size:
            if np.isfinite(size) and size >= 0.8 * threshold:
                shape.update(overrides)
    return shape


def map_row(row: pd.Series) -> tuple[GridRow | None, str]:
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
    draft_name = spec.method
    if spec.method == "draft_model":
        name = row["draft_model"] if isinstance(row["draft_model"], str) else spec.default_draft
        name = name.split(" (")[0].strip()  # "llama-3.1-8b (fp8)" -> "llama-3.1-8b"
        if not name or _loads("model", name):
            return None, f"draft model '{name or row['draft_model']}' is not in the catalogue"
        draft_name = name
    k = row["k"] if np.isfinite(row["k"]) else shape.get("k")
    if k is None:
        return None, "draft length not stated and no default"
    gpus = int(row["num_gpus"]) if np.isfinite(row["num_gpus"]) else 1
    tp = int(row["tp"]) if np.isfinite(row["tp"]) else 1
    # eager loops load models larger than one GPU with accelerate's device_map (the EAGLE / Medusa
    # repositories' from_pretrained(device_map="auto")): layers split over GPUs, run one after another
    pipeline = engine == "hf" and tp <= 1 and (gpus > 1 or _too_big(str(row["model"]), hardware))
    stages = (gpus if gpus > 1 else _stages(str(row["model"]), hardware)) if pipeline else 1
    grid: GridRow = {
        "id": row["id"], "hardware": hardware, "model": str(row["model"]).strip(),
        "engine": m.engine_profile(engine, row.get("engine_version"), str(row["group"])), "draft": draft_name,
        "weight_dtype": _weights(row), "kv_dtype": "bf16", "k": int(k), **_draft_shape(spec, shape, row),
        "tp": 1 if pipeline else max(tp, 1), "pp": stages, "layer_split": pipeline,
        "ep": _layout_note(row, "ep"), "dp": _layout_note(row, "dp"), "cp": _layout_note(row, "cp"),
        # a research loop's memory is not a serving engine's (no KV pool sized by a utilisation, no graph pool):
        # the engines' accounting (step/memory.py) would refuse splits the papers ran
        "check_memory": not pipeline,
        # a published run fitted its checkpoint's window: a long-context variant of the architecture where the
        # catalogue holds the base (TriForce's Yarn-extended Llama-2 at 128k, advise/grid.py INTERNAL)
        "check_context": False,
        "batch": int(row["batch"]) if np.isfinite(row["batch"]) else 1,
        "context": int(row["context"]) if np.isfinite(row["context"]) else DEFAULT_CONTEXT, **_stated(row)}
    return grid, ""


def _weights(row: pd.Series) -> str:
    """The weight format a row's notes state (`weights=nvfp4`), checked; where they state none, the checkpoint's
    own (`native`: bf16 for most, the released fp8 / fp4 formats of DeepSeek-V3/V4, Kimi, gpt-oss ...)."""
    found = re.search(r"weights=([A-Za-z0-9_]+)", str(row.get("notes", "")))
    if not found:
        return "native"
    try:
        return check_precision(found.group(1))
    except SpecsimError as exc:
        raise SpecsimError(f"published row {row['id']}: notes {found.group(0)}: {exc}") from None


def _draft_shape(spec: MethodSpec, shape: Mapping[str, int], row: pd.Series) -> DraftShape:
    """A tree's topk and size (where the row or the method drafts a tree), lookahead's window and guesses."""
    out: DraftShape = {}
    tree = str(row["shape"]).strip() == "tree" or (spec.tree and str(row["shape"]).strip() != "chain")
    if tree and spec.tree:
        out["topk"] = int(row["topk"]) if np.isfinite(row["topk"]) else shape.get("topk", 1)
        ndt = row["num_draft_tokens"] if np.isfinite(row["num_draft_tokens"]) else shape.get("num_draft_tokens")
        out["num_draft_tokens"] = int(ndt) if ndt is not None else None
    if spec.method == "lookahead":
        out["window"], out["guesses"] = shape.get("window", 7), shape.get("guesses", 7)
    return out


def _stated(row: pd.Series) -> Stated:
    """The source's measured acceptance, and what the acceptance prior is looked up for (priors mode): the
    benchmark and the sampling temperature."""
    out: Stated = {}
    if np.isfinite(row["acceptance_length"]):
        out["acceptance_length"] = float(row["acceptance_length"])
    if isinstance(row.get("dataset"), str) and row["dataset"].strip():
        out["task"] = row["dataset"].strip()
    if np.isfinite(row.get("temperature", np.nan)):
        out["temperature"] = float(row["temperature"])
    return out


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

"""EngineProfile: how a serving engine (or a research loop) runs a step, as data.

The same speculative step costs different time in vLLM, SGLang, TensorRT-LLM and an eager PyTorch
research loop: whether passes replay CUDA graphs (and how batches pad to the captured sizes), what
the host does per step and per sequence and whether an async / overlap scheduler hides it, how many
draft passes a step runs and over how many tokens, which all-reduce runs under tensor parallelism.
Each profile lives in `specsim/engines/data/NAME.yaml`; every number names its source in the
`sources:` block (a test enforces it) or says it is an estimate and why.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from specsim.cost.alltoall import ALLTOALL_IMPLEMENTATIONS
from specsim.engines.mla import MLA_BACKENDS
from specsim.errors import SpecsimError
from specsim.files import is_file, read_mapping
from specsim.names import resolve_name, unknown
from specsim.records import OMIT_NONE

ALLREDUCE_KINDS = ("custom", "nccl_graph", "nccl")
GRAPH_UNITS = ("tokens", "requests")
DRAFT_LOOPS = ("extend_then_decode", "extend_then_depth", "one_pass")


@dataclass(frozen=True)
class OpCount:
    """Ops per cycle of an eager loop: a + b x layers, for kernel launches, views and host-tensor ops."""

    kernel: tuple[float, float]
    view: tuple[float, float]
    host: tuple[float, float] = (0.0, 0.0)

    def weighted(self, layers: float, view_weight: float, host_weight: float) -> float:
        """Launch-equivalents: kernels + view_weight x views + host_weight x host-tensor ops."""
        k, v, h = (a + b * layers for a, b in (self.kernel, self.view, self.host))
        return k + view_weight * v + host_weight * h


@dataclass(frozen=True)
class EagerLoop:
    """The host side of an eager research loop: ops per plain step and per speculative cycle."""

    view_weight: float  # dispatch of a metadata-only op relative to a kernel launch
    host_weight: float  # an op on CPU tensors relative to a kernel launch
    baseline: str  # which plain loop the engine's speedups are measured against
    loops: dict[str, OpCount]  # plain decoding loops
    methods: dict[str, OpCount]  # speculative cycles by specsim draft method
    per_draft_token: OpCount  # draft models: one plain step of the drafter per drafted token (b = per drafter layer)
    gqa_per_layer: tuple[float, float]  # extra (kernel, view) ops per layer for grouped-query attention

    def plain_ops(self, layers: float, gqa: bool) -> float:
        return self._w(self.loops[self.baseline], layers, gqa)

    def cycle_ops(self, method: str, layers: float, gqa: bool, k: float = 0.0, draft_layers: float = 0.0) -> float:
        """Launch-equivalents of one speculative cycle (NaN when the method was not measured)."""
        if method not in self.methods:
            return float("nan")
        ops = self._w(self.methods[method], layers, gqa)
        if draft_layers:  # a separate draft model: its own dispatches for every token it drafts
            ops += k * self.per_draft_token.weighted(draft_layers, self.view_weight, self.host_weight)
        return ops

    def _w(self, c: OpCount, layers: float, gqa: bool) -> float:
        extra = (self.gqa_per_layer[0] + self.view_weight * self.gqa_per_layer[1]) * layers if gqa else 0.0
        return c.weighted(layers, self.view_weight, self.host_weight) + extra


@dataclass(frozen=True)
class EngineProfile:
    """One engine's execution model; times in microseconds as the YAML states them."""

    name: str
    description: str
    version: str
    cuda_graphs: bool
    graph_unit: str  # capture sizes count tokens (vLLM) or requests (SGLang, TensorRT-LLM)
    graph_sizes: tuple[int, ...]  # captured sizes
    graph_padding: bool  # a batch pads up to the next captured size (else only exact sizes replay a graph)
    graph_launch_us: float  # host cost of replaying one captured pass
    eager_op_us: float  # host cost of one kernel launched outside a graph (dispatch + launch)
    eager_kernels_per_layer: float  # kernels a decoder layer launches when a pass runs eagerly
    eager_kernels_extra: float  # kernels outside the layers per eager pass (embedding, norm, head, sampling)
    async_scheduling: bool  # host work of step n overlaps GPU work of step n - 1
    step_host_us: float  # host work per engine step (scheduling, input prep, sampling, detokenise)
    per_seq_host_us: float  # host work per running sequence per step
    step_exposed_us: float  # host time exposed per step even with async scheduling (sync, D2H of tokens)
    spec_step_host_us: float  # extra host work of a speculative step (proposal prep, accept bookkeeping)
    spec_per_seq_host_us: float  # extra host work of a speculative step per running sequence
    spec_sync: bool  # the speculative step runs without the async/overlap scheduler
    draft_loop: str  # extend_then_decode | extend_then_depth | one_pass (see drafts/cost.py)
    draft_graphs: bool  # draft passes replay CUDA graphs
    draft_pass_overhead_us: float  # host/launch cost of one draft pass beyond its kernels
    draft_tree_ops: float  # host kernel launches per draft pass for tree building (eager loops)
    verify_host_ops: float  # host kernel launches per speculative step to verify/accept (eager loops)
    allreduce: str  # custom | nccl_graph | nccl
    ngram_fixed_us: float  # host n-gram proposer: fixed cost per step
    ngram_ns_per_context_token: float  # host n-gram proposer: scan cost per context token
    ngram_empty_drafts: bool  # a request without an n-gram match verifies only its own token (else k + 1)
    #: the running requests the engine allows when speculating unless the user sets a limit (0: no such cap):
    #: SGLang resets max_running_requests to 48 for EAGLE / NGRAM
    spec_max_running: int = 0
    #: who runs the MoE all-to-all under expert parallelism (specsim/cost/alltoall.py
    #: ALLTOALL_IMPLEMENTATIONS): DeepEP's kernels alone ("deepep") or vLLM's / TensorRT-LLM's own
    #: DeepEP path ("vllm", "trtllm"), whose fitted per-phase overhead the cost model adds
    alltoall: str = "deepep"
    #: the MLA attention backend the engine runs (engines/mla.py MLA_BACKENDS): "" (its MLA decode kernels take
    #: q > 1), "vllm_auto" (vLLM's default per GPU) or a vLLM backend by name; one that takes one-token queries
    #: only sends verification down MLA's prefill path (cost.ops._mla_prefill_form)
    mla_backend: str = ""
    sources: dict[str, str] = field(default_factory=dict)
    source_path: str = ""  # the YAML read (`engines show` names it apart from the profile's figures)
    #: Eager research loops only: kernel / view / host-tensor ops per cycle as a + b x layers, measured per
    #: method on the loops' own code (see hf.yaml); None for engines that run graphs.
    eager_loop: EagerLoop | None = field(default=None, metadata=OMIT_NONE)

    @property
    def framework(self) -> str:
        """Whose kernels the engine runs (a hardware profile's `frameworks` block of that name, where the GPU has
        one): vllm, sglang or trtllm by the engine's name (versioned profiles included); "" for research loops and
        engines without NVIDIA tables (ATOM): the profile's own kernels."""
        base = self.name.split("-")[0].lower()
        return base if base in ("vllm", "sglang", "trtllm") else ""

    def graph_size(self, units: float) -> float | None:
        """The captured size a batch of `units` pads to, or None when it runs without a graph."""
        if not self.cuda_graphs:
            return None
        for size in self.graph_sizes:
            if size >= units:
                return float(size) if self.graph_padding or size == units else None
        return None


NUMBERS = ("graph_launch_us", "eager_op_us", "eager_kernels_per_layer", "eager_kernels_extra", "step_host_us",
           "per_seq_host_us", "step_exposed_us", "spec_step_host_us", "spec_per_seq_host_us", "draft_pass_overhead_us",
           "draft_tree_ops", "verify_host_ops", "ngram_fixed_us", "ngram_ns_per_context_token")
FLAGS = ("cuda_graphs", "graph_padding", "async_scheduling", "spec_sync", "draft_graphs", "ngram_empty_drafts")


def engines_dir() -> Path:
    return Path(str(resources.files("specsim.engines"))) / "data"


def available() -> list[str]:
    return sorted(p.stem for p in engines_dir().glob("*.yaml"))


def _path(name_or_path: str | Path) -> Path:
    """The YAML of a bundled engine by name (spelt in any case and separators: ``vLLM``, ``TRT-LLM``), or
    a user's YAML by path; an unknown name is refused naming the nearest bundled ones."""
    text = str(name_or_path).strip()
    path = Path(text)
    if text.endswith((".yaml", ".yml")) or is_file(path):
        return path
    if "/" not in text and is_file(bundled := engines_dir() / f"{text}.yaml"):
        return bundled
    known = available()
    name = resolve_name(text, known)
    if name is None:
        raise unknown("engine", text, known, also="or a path to a YAML")
    return engines_dir() / f"{name}.yaml"


def _resolved(path: Path, seen: tuple[str, ...] = ()) -> dict[str, object]:
    """The profile mapping with its `base:` chain applied: a version profile states only what differs
    from the engine it extends (its own `sources` entries override the base's)."""
    data = read_mapping(path)
    base = data.pop("base", None)
    if base is None:
        return data
    if str(base) in seen:
        raise SpecsimError(f"{path}: 'base' chain loops through {base!r}")
    return _merge(_resolved(_path(str(base)), (*seen, str(base))), data)


def _merge(base: Mapping[str, object], over: Mapping[str, object]) -> dict[str, object]:
    """`over` on top of `base`, mappings merged key by key (sources, eager_loop)."""
    out = dict(base)
    for key, value in over.items():
        old = out.get(key)
        out[key] = _merge(old, value) if isinstance(value, dict) and isinstance(old, dict) else value
    return out


def engine_name(name_or_path: str | Path) -> str:
    """The bundled name an engine spelt otherwise stands for (``vLLM`` -> ``vllm``), a path as given: what
    an answer echoes. SpecsimError for an unknown name, as ``load_engine``."""
    path = _path(name_or_path)
    return path.stem if path.parent == engines_dir() and str(name_or_path).strip() != str(path) else str(name_or_path)


def load_engine(name_or_path: str | Path) -> EngineProfile:
    """A bundled engine by name (vllm, sglang, trtllm, hf and versions such as vllm-v0), or a YAML path."""
    path = _path(name_or_path)
    return parse_engine(_resolved(path), str(path))


def parse_engine(data: Mapping[str, object], where: str) -> EngineProfile:
    """Validate an engine mapping: every field present, typed, in range, and sourced."""
    known = {f.name for f in dataclasses.fields(EngineProfile)} - {"source_path"}
    unknown = set(data) - known
    if unknown:
        raise SpecsimError(f"{where}: unknown field(s) {sorted(unknown)} (allowed: {', '.join(sorted(known))})")
    missing = sorted(known - set(data) - {"sources", "eager_loop", "spec_max_running", "alltoall", "mla_backend"})
    if missing:
        raise SpecsimError(f"{where}: missing field(s) {missing}")
    values: dict[str, Any] = {}  # the numbers, flags and kinds, checked (EngineProfile's keyword arguments)
    for key in NUMBERS:
        v = data[key]
        if isinstance(v, bool) or not isinstance(v, int | float) or not v >= 0:
            raise SpecsimError(f"{where}: field '{key}' must be a number >= 0, got {v!r}")
        values[key] = float(v)
    for key in FLAGS:
        if not isinstance(data[key], bool):
            raise SpecsimError(f"{where}: field '{key}' must be true or false, got {data[key]!r}")
        values[key] = data[key]
    for key, allowed in (("graph_unit", GRAPH_UNITS), ("draft_loop", DRAFT_LOOPS), ("allreduce", ALLREDUCE_KINDS)):
        if data[key] not in allowed:
            raise SpecsimError(f"{where}: field '{key}' must be one of {', '.join(allowed)}, got {data[key]!r}")
        values[key] = data[key]
    sizes = data["graph_sizes"]
    if not isinstance(sizes, list) or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in sizes) or (
            sizes != sorted(sizes)):
        raise SpecsimError(f"{where}: field 'graph_sizes' must be an ascending list of integers >= 1")
    if values["cuda_graphs"] and not sizes:
        raise SpecsimError(f"{where}: cuda_graphs is true but graph_sizes is empty")
    sources = data.get("sources") or {}
    if not isinstance(sources, dict):
        raise SpecsimError(f"{where}: field 'sources' must map field names to their sources")
    needed = (*NUMBERS, "graph_sizes", "graph_padding", "allreduce", "draft_loop", "spec_sync", "ngram_empty_drafts")
    unsourced = [k for k in needed if not str(sources.get(k, "")).strip()]
    if unsourced:
        raise SpecsimError(f"{where}: every number needs a source; missing sources for {unsourced}")
    cap = data.get("spec_max_running", 0)
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
        raise SpecsimError(f"{where}: field 'spec_max_running' must be an integer >= 0 (0: no cap), got {cap!r}")
    if cap and not str(sources.get("spec_max_running", "")).strip():
        raise SpecsimError(f"{where}: every number needs a source; missing sources for ['spec_max_running']")
    values["spec_max_running"] = cap
    a2a = data.get("alltoall", "deepep")
    if a2a not in ALLTOALL_IMPLEMENTATIONS:
        raise SpecsimError(f"{where}: field 'alltoall' must be one of {', '.join(ALLTOALL_IMPLEMENTATIONS)}, "
                           f"got {a2a!r}")
    if "alltoall" in data and not str(sources.get("alltoall", "")).strip():
        raise SpecsimError(f"{where}: every number needs a source; missing sources for ['alltoall']")
    values["alltoall"] = a2a
    mla = data.get("mla_backend", "")
    if mla not in MLA_BACKENDS:
        raise SpecsimError(f"{where}: field 'mla_backend' must be one of {', '.join(map(repr, MLA_BACKENDS))}, "
                           f"got {mla!r}")
    if mla and not str(sources.get("mla_backend", "")).strip():
        raise SpecsimError(f"{where}: every number needs a source; missing sources for ['mla_backend']")
    values["mla_backend"] = mla
    eager = _eager_loop(data.get("eager_loop"), where) if data.get("eager_loop") is not None else None
    return EngineProfile(name=str(data["name"]), description=str(data["description"]), version=str(data["version"]),
                         graph_sizes=tuple(int(s) for s in sizes), sources={str(k): str(v) for k, v in sources.items()},
                         source_path=where, eager_loop=eager, **values)


def _pair(value: object, where: str) -> tuple[float, float]:
    if (not isinstance(value, list) or len(value) != 2
            or any(isinstance(v, bool) or not isinstance(v, int | float) or v < 0 for v in value)):
        raise SpecsimError(f"{where}: expected [a, b] (ops = a + b x layers, both >= 0), got {value!r}")
    return float(value[0]), float(value[1])


def _count(raw: object, where: str) -> OpCount:
    if not isinstance(raw, dict) or not {"kernel", "view"} <= set(raw) or set(raw) - {"kernel", "view", "host"}:
        raise SpecsimError(f"{where}: expected {{kernel: [a, b], view: [a, b], host: [a, b]}}, got {raw!r}")
    return OpCount(_pair(raw["kernel"], f"{where}.kernel"), _pair(raw["view"], f"{where}.view"),
                   _pair(raw.get("host", [0, 0]), f"{where}.host"))


def _eager_loop(raw: object, where: str) -> EagerLoop:
    w = f"{where}: eager_loop"
    need = {"view_weight", "host_weight", "baseline", "loops", "methods", "per_draft_token", "gqa_per_layer",
            "source"}
    if not isinstance(raw, dict) or set(raw) != need:
        got = sorted(raw) if isinstance(raw, dict) else raw
        raise SpecsimError(f"{w}: expected the fields {sorted(need)}, got {got}")
    if not str(raw["source"]).strip():
        raise SpecsimError(f"{w}: the op counts need a source")
    loops = {str(k): _count(v, f"{w}.loops.{k}") for k, v in (raw["loops"] or {}).items()}
    if raw["baseline"] not in loops:
        raise SpecsimError(f"{w}: baseline {raw['baseline']!r} is not one of the loops {sorted(loops)}")
    weights = [raw[k] for k in ("view_weight", "host_weight")]
    if any(isinstance(x, bool) or not isinstance(x, int | float) or not 0 <= x <= 1 for x in weights):
        raise SpecsimError(f"{w}: view_weight and host_weight must be numbers in [0, 1]")
    return EagerLoop(float(raw["view_weight"]), float(raw["host_weight"]), str(raw["baseline"]), loops,
                     {str(k): _count(v, f"{w}.methods.{k}") for k, v in (raw["methods"] or {}).items()},
                     _count(raw["per_draft_token"], f"{w}.per_draft_token"),
                     _pair(raw["gqa_per_layer"], f"{w}.gqa_per_layer"))

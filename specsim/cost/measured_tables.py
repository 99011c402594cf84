"""The measured tables of one GPU and framework as ratio grids (ratio_grid.py): built from measurement rows and the
roofline, the rows read from a CSV or NVIDIA's aiconfigurator tables of the engine's own framework, cached per
profile. A framework NVIDIA did not measure on a GPU (or an engine without NVIDIA tables: ATOM, the research loops)
gets no grids, and says so (`MeasuredTables.missing`): the roofline prices every kernel, never another framework's
tables."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.ratio_grid import RatioGrid
from specsim.cost.table_grids import (
    GemmKey,
    MoeKey,
    allreduce_grids,
    attention_grids,
    gemm_grids,
    mla_grids,
    moe_grids,
    text_columns,
)
from specsim.errors import SpecsimError

if TYPE_CHECKING:  # pandas only where measured tables are built or read (start-up of the planner)
    import pandas as pd

#: The frameworks NVIDIA's tables measure (aiconfigurator-core's framework folders; nccl-tests serve them all).
TABLE_FRAMEWORKS = ("vllm", "sglang", "trtllm")
#: How each framework spells itself (its README), for the labels of answers priced from its tables.
FRAMEWORK_NAMES = {"sglang": "SGLang", "vllm": "vLLM", "trtllm": "TensorRT-LLM"}


@dataclass(frozen=True)
class MeasuredTables:
    """Ratio grids of one GPU and framework, built from measurement rows and the roofline.

    gemm_grid: per `table_key` of the weight format (block-scaled fp8 apart from per-tensor fp8), tokens x N x K.
    decode / prefill: per (heads, KV heads, head size, KV bytes | compute dtype), batch x KV length | prompt length.
    moe: per `MoeKey`, tokens before routing (NVIDIA's convention, every EP rank's tokens). allreduce: per
    (implementation, GPUs), bytes. mla: per (heads per GPU, KV bytes), batch x KV length (decode).
    `framework` whose tables, `versions` the framework versions the grids came from, `missing` why there are none."""

    source: str
    gemm_grid: Mapping[GemmKey, RatioGrid] = field(default_factory=dict)
    decode: Mapping[tuple[float, float, float, float], RatioGrid] = field(default_factory=dict)
    prefill: Mapping[tuple[float, float, float, str], RatioGrid] = field(default_factory=dict)
    moe: Mapping[MoeKey, RatioGrid] = field(default_factory=dict)
    allreduce: Mapping[tuple[str, float], RatioGrid] = field(default_factory=dict)
    mla: Mapping[tuple[float, float], RatioGrid] = field(default_factory=dict)
    rows: int = 0
    framework: str = ""
    versions: tuple[str, ...] = ()
    missing: str = ""

    @property
    def name(self) -> str:
        """Whose tables: "SGLang 0.5.10-0.5.14 tables" (a framework's, with the versions the grids came from), else
        the source ("measured tables FILE")."""
        v = self.versions
        if self.framework not in FRAMEWORK_NAMES or not v:
            return self.source
        return f"{FRAMEWORK_NAMES[self.framework]} {v[0] if len(v) == 1 else f'{v[0]}-{v[-1]}'} tables"

    @property
    def label(self) -> str:
        """Whose tables and where from ("SGLang 0.5.10-0.5.14 tables, aiconfigurator-core 0.12.0"), or why none."""
        if self.missing:
            return f"no tables: {self.missing}"
        return self.source if self.name == self.source else f"{self.name}, {self.source}"


def build_tables(df: pd.DataFrame, hw: HardwareProfile, source: str, framework: str = "") -> MeasuredTables:
    """Ratio grids from measurement rows of one GPU (one framework's kernels: table_grids.main_kernel), family by
    family, each grid built on first use (table_grids.LazyGrids)."""
    df = text_columns(df)
    rows = {op: df[df["op"] == op] for op in ("gemm", "attention", "moe", "allreduce", "mla")}
    decode, prefill = attention_grids(rows["attention"], hw)
    used = [r for op, r in rows.items() if op != "allreduce" and len(r)]
    versions = sorted({str(v) for r in used for v in r["framework_version"].unique() if str(v)}, key=_version_key)
    return MeasuredTables(source, gemm_grids(rows["gemm"], hw), decode, prefill, moe_grids(rows["moe"], hw),
                          allreduce_grids(rows["allreduce"], hw), mla_grids(rows["mla"], hw), len(df), framework,
                          tuple(versions))


def _version_key(v: str) -> tuple[tuple[int, ...], tuple[int, int], str]:
    from specsim.cost.aiconfigurator_files import version_key  # (pandas: not at the planner's start-up)

    return version_key(v)


_TABLES: dict[tuple[str, str, str | None, str], MeasuredTables] = {}
_LOCK = threading.Lock()
TableLoader = Callable[[HardwareProfile], "tuple[pd.DataFrame, str]"]
#: The families the table cost model reads from NVIDIA's tables (aiconfigurator.FAMILIES).
TABLE_FAMILIES = ("gemm", "attention", "moe", "allreduce", "mla")


def no_tables(hw: HardwareProfile) -> str:
    """Why `hw`'s framework has no NVIDIA tables on this GPU ("" when it may have some): an engine whose framework
    NVIDIA does not measure, or a GPU and framework aiconfigurator-core ships no table for."""
    from specsim.cost import aiconfigurator as aic

    fw = hw.cost_model.framework
    if hw.cost_model.measurements:
        return ""
    if fw not in TABLE_FRAMEWORKS:
        return f"NVIDIA's tables measure vLLM, SGLang and TensorRT-LLM, not this engine's kernels ({fw or 'its own'})"
    aic.require_tables("--cost-model table")
    found = aic.framework_tables(aic.system_name(hw.name), fw)
    if not any(family in found for family in ("gemm", "attention", "moe", "mla")):
        return f"aiconfigurator-core {aic.installed_version()} has no {FRAMEWORK_NAMES[fw]} tables for {hw.name}"
    return ""


def _load_rows(hw: HardwareProfile) -> tuple[pd.DataFrame, str]:
    """Measurement rows for `hw`'s table backend: its CSV, or NVIDIA's tables of its framework on this GPU."""
    choice = hw.cost_model
    if choice.measurements:
        from specsim.cost.measurements import read_measurements

        df = read_measurements(choice.measurements)
        df = df[df["device"].isin(["", hw.name])]
        if (df["framework"] == choice.framework).any():  # a CSV of several frameworks: the chosen one's
            df = df[df["framework"].isin([choice.framework, "nccl", ""])]
        return df, f"measured tables {choice.measurements}"
    from specsim.cost import aiconfigurator as aic

    df = aic.import_aiconfigurator([aic.system_name(hw.name)], [choice.framework, "nccl"], TABLE_FAMILIES)
    return df, f"aiconfigurator-core {aic.installed_version()}"


def tables_for(hw: HardwareProfile, loader: TableLoader = _load_rows) -> MeasuredTables:
    """The (cached) ratio grids for `hw`'s table backend: its framework's (`hw.cost_model.framework`), none (stated
    in `missing`) where that framework has no tables on this GPU."""
    choice = hw.cost_model
    key = (hw.name, choice.framework, choice.measurements, repr(hw.efficiency))
    with _LOCK:
        if key not in _TABLES:
            why = no_tables(hw) if loader is _load_rows else ""
            if why:
                _TABLES[key] = MeasuredTables(f"no tables: {why}", framework=choice.framework, missing=why)
            else:
                df, source = loader(hw)
                if df.empty:
                    raise SpecsimError(f"{hw.name}: no measured rows for the table cost model ({source})")
                _TABLES[key] = build_tables(df, hw, source, "" if choice.measurements else choice.framework)
        return _TABLES[key]

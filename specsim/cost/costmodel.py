"""Cost models: what times one kernel of the forward pass. One protocol, two implementations,
chosen per hardware profile (`cost_model:` in its YAML) or with `--cost-model` — the shape of Vidur's
execution-time predictors (one abstract predictor, several implementations chosen by config).

* ``RooflineCostModel`` (here): the analytic model of roofline.py, attention.py and moe.py (fitted
  efficiencies of the profile).
* ``TableCostModel`` (table_model.py): measured kernels interpolated where a shape is covered, the
  roofline outside, as Vidur and NVIDIA's aiconfigurator do.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, cast

import numpy as np
from numpy.typing import ArrayLike

from specsim.cost.attention import attention_time_s
from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.moe import moe_fixed_s, moe_gemm_s
from specsim.cost.roofline import Array, allreduce_time_s, gemm_time_s, memory_op_time_s

if TYPE_CHECKING:  # the measured tables (pandas) only where a profile chooses them
    from specsim.cost.table_model import TableCostModel


class CostModel(Protocol):
    """Seconds of each kernel family of a forward pass on one profile (arrays broadcast)."""

    @property
    def name(self) -> str: ...  # read-only: RooflineCostModel is a frozen dataclass

    def describe(self) -> str: ...

    def gemm(self, m: ArrayLike, n: ArrayLike, k: ArrayLike, dtype: str = "bf16", weight_bytes: float = 2.0,
             act_bytes: float = 2.0, groups: ArrayLike = 1.0, compute_scale: float = 1.0,
             ) -> tuple[Array, Array, Array]: ...

    def attention(self, batch: ArrayLike, q_per_seq: ArrayLike, context_len: ArrayLike, heads: ArrayLike,
                  kv_heads: ArrayLike, qk_dim: ArrayLike, v_dim: ArrayLike, kv_bytes_per_token: ArrayLike,
                  dtype: str = "bf16") -> tuple[Array, Array, Array, Array, Array]: ...

    def moe_ratio(self, tokens: ArrayLike, hidden: float, inter: float, n_experts: float, top_k: float,
                  dtype: str, weight_bytes: float, ep: float | None = None) -> Array: ...

    def moe_fixed(self, routing_bytes: ArrayLike, permute_bytes: ArrayLike, active_experts: ArrayLike) -> Array: ...

    def moe_gemm(self, tokens: ArrayLike, rows: ArrayLike, active: ArrayLike, n: float, k: float, n_experts: float,
                 inter: float, dtype: str = "bf16", weight_bytes: float = 2.0, act_bytes: float = 2.0,
                 ) -> tuple[Array, Array, Array]: ...

    def allreduce(self, bytes_: ArrayLike, world_size: ArrayLike, impl: str = "nccl") -> Array: ...

    def memory_op(self, bytes_: ArrayLike, kernels: ArrayLike = 1.0) -> Array: ...

    def monotone_tokens(self, key: Hashable, price: Callable[[Array], Array], tokens: ArrayLike, raw: ArrayLike
                        ) -> Array: ...


@dataclass(frozen=True)
class RooflineCostModel:
    """The analytic roofline (roofline.py, attention.py, moe.py) on `hw`'s fitted efficiencies."""

    hw: HardwareProfile
    name: str = "roofline"

    def describe(self) -> str:
        return "roofline"

    def gemm(self, m: ArrayLike, n: ArrayLike, k: ArrayLike, dtype: str = "bf16", weight_bytes: float = 2.0,
             act_bytes: float = 2.0, groups: ArrayLike = 1.0, compute_scale: float = 1.0,
             ) -> tuple[Array, Array, Array]:
        return gemm_time_s(m, n, k, self.hw, dtype, weight_bytes, act_bytes, groups, compute_scale=compute_scale)

    def attention(self, batch: ArrayLike, q_per_seq: ArrayLike, context_len: ArrayLike, heads: ArrayLike,
                  kv_heads: ArrayLike, qk_dim: ArrayLike, v_dim: ArrayLike, kv_bytes_per_token: ArrayLike,
                  dtype: str = "bf16") -> tuple[Array, Array, Array, Array, Array]:
        return attention_time_s(batch, q_per_seq, context_len, heads, kv_heads, qk_dim, v_dim, kv_bytes_per_token,
                                   self.hw, dtype)

    def moe_ratio(self, tokens: ArrayLike, hidden: float, inter: float, n_experts: float, top_k: float,
                  dtype: str, weight_bytes: float, ep: float | None = None) -> Array:
        """Correction of a fused-MoE layer's roofline time (1: the roofline is the answer); `ep` the layer's
        expert-parallel degree (its rank holds n_experts / ep experts), None when the caller does not say."""
        return np.ones(np.shape(tokens))

    def moe_fixed(self, routing_bytes: ArrayLike, permute_bytes: ArrayLike, active_experts: ArrayLike) -> Array:
        """The fused-MoE layer's time outside its GEMM tiles (moe.moe_fixed_s)."""
        return moe_fixed_s(routing_bytes, permute_bytes, active_experts, self.hw)

    def moe_gemm(self, tokens: ArrayLike, rows: ArrayLike, active: ArrayLike, n: float, k: float, n_experts: float,
                 inter: float, dtype: str = "bf16", weight_bytes: float = 2.0, act_bytes: float = 2.0,
                 ) -> tuple[Array, Array, Array]:
        """One grouped GEMM of a fused-MoE layer as the GPU's kernel family runs it (moe.moe_gemm_s):
        T = `tokens`, `active` experts of `rows` rows each, experts of width `inter`."""
        return moe_gemm_s(tokens, rows, active, n, k, n_experts, inter, self.hw, dtype, weight_bytes, act_bytes)

    def allreduce(self, bytes_: ArrayLike, world_size: ArrayLike, impl: str = "nccl") -> Array:
        return allreduce_time_s(bytes_, world_size, self.hw, impl)

    def memory_op(self, bytes_: ArrayLike, kernels: ArrayLike = 1.0) -> Array:
        return memory_op_time_s(bytes_, self.hw, kernels)

    def monotone_tokens(self, key: Hashable, price: Callable[[Array], Array], tokens: ArrayLike, raw: ArrayLike
                        ) -> Array:
        """`raw` itself: the roofline's token-count kernels do not fall with more tokens (each tile configuration's
        waves grow with the rows; tests/cost/test_monotone.py)."""
        return np.asarray(raw, dtype=float)


def cost_model(hw: HardwareProfile) -> RooflineCostModel | TableCostModel:
    """The cost model `hw` selects (`cost_model.backend`)."""
    if hw.cost_model.backend == "table":
        # one per profile (beside its fields, as for_framework's derived profiles): it keeps its kernels' monotone
        # envelopes (table_model.monotone_envelope)
        if (cm := hw.__dict__.get("_table_cost_model")) is None:
            # here, not at the top: table_model builds on RooflineCostModel, and the roofline needs no pandas
            from specsim.cost.measured_tables import tables_for
            from specsim.cost.table_model import TableCostModel

            cm = hw.__dict__.setdefault("_table_cost_model", TableCostModel(hw, tables_for(hw)))
        return cast("TableCostModel", cm)
    return RooflineCostModel(hw)


def describe(hw: HardwareProfile, framework: str | None = None) -> str:
    """One line naming the cost model a profile uses (for plan / evaluate / report outputs), without reading a table:
    "roofline", or the table model with whose tables (`CostModelChoice.framework`), or why there are none
    (measured_tables.no_tables: an engine NVIDIA does not measure, a GPU without that framework's tables).
    `framework`: the profile as an engine of that framework runs it (`HardwareProfile.for_framework`, as
    engines/passes.py prices it); None: as given. How much of a pass the tables priced: table_coverage.py."""
    if framework is not None:
        hw = hw.for_framework(framework)
    choice = hw.cost_model
    if choice.backend != "table":
        return "roofline"
    from specsim.cost.measured_tables import FRAMEWORK_NAMES, no_tables

    if why := no_tables(hw):
        return f"table ({why}: roofline throughout)"
    where = choice.measurements or f"aiconfigurator {FRAMEWORK_NAMES[choice.framework]} tables"
    return f"table ({where}; roofline outside the measured shapes)"


__all__ = ["CostModel", "RooflineCostModel", "cost_model", "describe"]

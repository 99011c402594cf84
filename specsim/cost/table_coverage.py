"""How much of a pass the measured tables priced: the share of its kernel time that came from NVIDIA's (or a CSV's)
measured kernels under `--cost-model table`, and which kernels the roofline priced instead, for an answer to state
beside its figures ("table (SGLang 0.5.10-0.5.14 tables: 83% of the verify pass; roofline: all-to-all, ...)").

Method: the pass is priced twice through the same op builders (forward.breakdown): as it is, and with every kernel a
table priced set to zero (`_Uncovered`, a cost model that returns, for each kernel, the time the tables did not price:
table_model.TableCostModel's `*_covered` masks). What the second pass leaves is the roofline's (with the kernels no
cost model call prices: the MoE all-to-all, fitted to NVIDIA's DeepEP tables but not read from them, linear-attention
mixers, pipeline sends), so the tables' time of each op is its time less what is left. The MoE layer's monotone
envelope (ops.py) is kept exact: the envelope is taken on the true layer and masked afterwards."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from specsim.cost.costmodel import cost_model
from specsim.cost.forward import breakdown
from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.layout import Layout
from specsim.cost.model_spec import ModelSpec
from specsim.cost.ops import PassShape, make_shape
from specsim.cost.roofline import Array
from specsim.cost.table_model import TableCostModel

#: How an answer names an op of cost/ops.py (others by their own name).
OP_LABELS = {"qkv": "QKV projections", "o": "output projections", "attention": "attention",
             "attention_sparse": "sparse attention", "attention_local": "local attention", "kv_write": "KV writes",
             "up": "MLP / expert GEMMs", "down": "MLP / expert GEMMs", "moe_routing": "MoE routing",
             "router": "router", "shared_up": "shared experts", "shared_down": "shared experts",
             "latent_down": "MoE latent", "latent_up": "MoE latent", "elementwise": "element-wise",
             "allreduce": "all-reduce", "allreduce_mixer": "all-reduce", "embedding": "embedding",
             "lm_head": "LM head", "sampling": "sampling", "pipeline_send": "pipeline sends",
             "context_parallel": "context-parallel exchange"}

#: `PassCoverage.missing` of a profile on the roofline cost model.
ROOFLINE = "the roofline cost model"


@dataclass(frozen=True)
class OpCoverage:
    """One kind of op of a pass (ops of one label summed): its kernel time and the part the tables priced."""

    label: str
    time_s: Array
    table_s: Array

    @property
    def roofline_s(self) -> Array:
        return self.time_s - self.table_s


@dataclass(frozen=True)
class PassCoverage:
    """The share of one pass's kernel time the measured tables priced (the launch overhead, a profile constant, is
    neither). `tables` whose ("SGLang 0.5.10-0.5.14 tables", "measured tables FILE"; MeasuredTables.name),
    `framework` and `versions` theirs, `missing` why there were none ("" when there were), `ops` per op label,
    largest time first."""

    tables: str
    framework: str
    versions: tuple[str, ...]
    missing: str
    kernel_s: Array
    table_s: Array
    ops: tuple[OpCoverage, ...]

    @property
    def share(self) -> Array:
        """Fraction of the kernel time priced by the tables (0 where the pass has none)."""
        k = np.asarray(self.kernel_s, dtype=float)
        return np.where(k > 0, np.asarray(self.table_s, dtype=float) / np.where(k > 0, k, 1.0), 0.0)

    def roofline_ops(self, min_share: float = 0.02) -> list[str]:
        """Labels of the ops whose roofline-priced time is at least `min_share` of the pass, largest first."""
        total = float(np.sum(self.kernel_s)) or 1.0
        parts = sorted(((float(np.sum(o.roofline_s)), o.label) for o in self.ops), reverse=True)
        return [label for t, label in parts if t >= min_share * total]


class _Uncovered:
    """A cost model answering, for each kernel, the time of `table`'s pricing that no table priced (0 where one did):
    the roofline's share of every kernel the pass's op builders price through a cost model."""

    name = "table"  # ops.py takes the table branch (the MoE layer's envelope), as for `table`

    def __init__(self, table: TableCostModel) -> None:
        self.table = table
        self.masked = True

    @contextmanager
    def _unmasked(self) -> Iterator[None]:
        self.masked = False
        try:
            yield
        finally:
            self.masked = True

    def _left(self, covered: Array) -> Array:
        return np.where(covered, 0.0, 1.0) if self.masked else np.ones(np.shape(covered))

    def describe(self) -> str:
        return self.table.describe()

    def gemm(self, m: ArrayLike, n: ArrayLike, k: ArrayLike, dtype: str = "bf16", weight_bytes: float = 2.0,
             act_bytes: float = 2.0, groups: ArrayLike = 1.0, compute_scale: float = 1.0,
             ) -> tuple[Array, Array, Array]:
        t, c, mem = self.table.gemm(m, n, k, dtype, weight_bytes, act_bytes, groups, compute_scale)
        return t * self._left(self.table.gemm_covered(m, n, k, dtype, weight_bytes, groups, compute_scale)), c, mem

    def attention(self, batch: ArrayLike, q_per_seq: ArrayLike, context_len: ArrayLike, heads: ArrayLike,
                  kv_heads: ArrayLike, qk_dim: ArrayLike, v_dim: ArrayLike, kv_bytes_per_token: ArrayLike,
                  dtype: str = "bf16") -> tuple[Array, Array, Array, Array, Array]:
        args = (batch, q_per_seq, context_len, heads, kv_heads, qk_dim, v_dim, kv_bytes_per_token, dtype)
        t, c, mem, flops, bytes_ = self.table.attention(*args)
        return t * self._left(self.table.attention_covered(*args)), c, mem, flops, bytes_

    def moe_ratio(self, tokens: ArrayLike, hidden: float, inter: float, n_experts: float, top_k: float,
                  dtype: str, weight_bytes: float, ep: float | None = None) -> Array:
        args = (tokens, hidden, inter, n_experts, top_k, dtype, weight_bytes, ep)
        return self.table.moe_ratio(*args) * self._left(self.table.moe_covered(*args))

    def moe_fixed(self, routing_bytes: ArrayLike, permute_bytes: ArrayLike, active_experts: ArrayLike) -> Array:
        return self.table.moe_fixed(routing_bytes, permute_bytes, active_experts)

    def moe_gemm(self, tokens: ArrayLike, rows: ArrayLike, active: ArrayLike, n: float, k: float, n_experts: float,
                 inter: float, dtype: str = "bf16", weight_bytes: float = 2.0, act_bytes: float = 2.0,
                 ) -> tuple[Array, Array, Array]:
        return self.table.moe_gemm(tokens, rows, active, n, k, n_experts, inter, dtype, weight_bytes, act_bytes)

    def allreduce(self, bytes_: ArrayLike, world_size: ArrayLike, impl: str = "nccl") -> Array:
        return self.table.allreduce(bytes_, world_size, impl) * self._left(
            self.table.allreduce_covered(bytes_, world_size, impl))

    def memory_op(self, bytes_: ArrayLike, kernels: ArrayLike = 1.0) -> Array:
        return self.table.memory_op(bytes_, kernels)

    def monotone_tokens(self, key: Hashable, price: Callable[[Array], Array], tokens: ArrayLike, raw: ArrayLike
                        ) -> Array:
        """The true layer's envelope (price and raw re-evaluated unmasked), times the part left (raw / true raw:
        0 or 1 per point), so the MoE layer's scale in ops.py is its table scale where uncovered, 0 where covered."""
        with self._unmasked():
            true_raw = np.asarray(price(np.asarray(tokens, dtype=float)), dtype=float)
            env = self.table.monotone_tokens(key, price, tokens, true_raw)
        left = np.where(true_raw > 0, np.asarray(raw, dtype=float) / np.where(true_raw > 0, true_raw, 1.0), 0.0)
        return np.asarray(env * left, dtype=float)


def _label(name: str, shape: PassShape, model: ModelSpec) -> str:
    if name == "allreduce" and model.is_moe and shape.layout.dp > 1 and shape.layout.ep > 1:
        return "all-reduce / MoE all-to-all"
    return OP_LABELS.get(name, name)


def table_coverage(model: ModelSpec, hw: HardwareProfile, shape: PassShape) -> PassCoverage:
    """The share of the pass of `shape` on `hw` (the engine's kernels: `HardwareProfile.for_framework`) that its
    measured tables priced, per op label. A profile on the roofline: nothing from tables (`missing` says so)."""
    full = breakdown(model, hw, shape)
    kernel_s = np.asarray(full.time_s - full.overhead_s, dtype=float)
    cm = cost_model(hw)
    if not isinstance(cm, TableCostModel):
        zero = np.zeros_like(kernel_s)
        return PassCoverage("", "", (), ROOFLINE, kernel_s, zero, ())
    probe_hw = dataclasses.replace(hw)  # its own identity: the op builders' memos never mix the two pricings
    probe_hw.__dict__["_table_cost_model"] = _Uncovered(cm)  # costmodel.cost_model's per-profile slot
    left = breakdown(model, probe_hw, shape)
    by_label: dict[str, tuple[Array, Array]] = {}
    for op, rest in zip(full.ops, left.ops, strict=True):
        t = np.asarray(op.time_s * op.count, dtype=float)
        table = np.clip(t - np.asarray(rest.time_s * rest.count, dtype=float), 0.0, None)
        label = _label(op.name, shape, model)
        prev = by_label.get(label, (np.zeros_like(t), np.zeros_like(t)))
        by_label[label] = (prev[0] + t, prev[1] + table)
    ops = sorted((OpCoverage(label, t, table) for label, (t, table) in by_label.items()),
                 key=lambda o: -float(np.sum(o.time_s)))
    table_s = sum((o.table_s for o in ops), np.zeros_like(kernel_s))
    tables = cm.tables
    return PassCoverage(tables.name, tables.framework, tables.versions, tables.missing, kernel_s, table_s, tuple(ops))


def pass_coverage(model: ModelSpec, hw: HardwareProfile, batch: ArrayLike, q_per_seq: ArrayLike,
                  context_len: ArrayLike, tp: int | Layout = 1, weight_dtype: str = "bf16", kv_dtype: str = "bf16",
                  allreduce: str = "custom", alltoall: str = "deepep", framework: str | None = None) -> PassCoverage:
    """`table_coverage` of B sequences x q tokens over context L as an engine of `framework` runs them
    (`hw.for_framework(framework)`, the profile engines/passes.py prices with; None: `hw` as given), with the
    engine's all-reduce and all-to-all (EngineProfile.allreduce, .alltoall). The verify pass of a k-token chain is
    q = k + 1."""
    kernels = hw if framework is None else hw.for_framework(framework)
    shape = make_shape(batch, q_per_seq, context_len, tp, weight_dtype, kv_dtype, allreduce, alltoall)
    return table_coverage(model, kernels, shape)


def coverage_label(verify: PassCoverage, draft: PassCoverage | None = None, top: int = 3) -> str:
    """One line for an answer's cost-model echo: whose tables, the share of the verify pass (and of the draft's
    pass) they priced, and the largest roofline-priced ops, e.g. "table (SGLang 0.5.10-0.5.14 tables: 83% of the
    verify pass, 64% of the draft; roofline: all-reduce / MoE all-to-all, element-wise, LM head)"."""
    if verify.missing == ROOFLINE:
        return "roofline"
    if verify.missing:
        return f"table ({verify.missing}: roofline throughout)"
    share = float(np.sum(verify.table_s)) / (float(np.sum(verify.kernel_s)) or 1.0)
    parts = [f"{share:.0%} of the verify pass"]
    if draft is not None and not draft.missing:
        d = float(np.sum(draft.table_s)) / (float(np.sum(draft.kernel_s)) or 1.0)
        parts.append(f"{d:.0%} of the draft")
    rest = verify.roofline_ops()[:top]
    tail = f"; roofline: {', '.join(rest)}" if rest else ""
    return f"table ({verify.tables}: {', '.join(parts)}{tail})"


__all__ = ["OP_LABELS", "ROOFLINE", "OpCoverage", "PassCoverage", "coverage_label", "pass_coverage", "table_coverage"]

"""How a model is spread over GPUs: the parallel layout one pass runs under.

One frozen value for every split a 2026 deployment combines (the engines' flags in brackets):

- ``tp``: tensor parallelism of attention (Megatron-LM column/row split): heads split over ``tp`` GPUs
  [vLLM ``--tensor-parallel-size``; SGLang ``--tp`` divided by ``--dp`` under DP attention].
- ``dp``: data-parallel attention: ``dp`` groups of ``tp`` GPUs each run attention for their own share of the
  batch and hold only their own sequences' KV cache, while the MoE layers see every group's tokens
  [SGLang ``--enable-dp-attention --dp N``; vLLM ``--data-parallel-size N`` with ``--enable-expert-parallel``;
  TensorRT-LLM ``enable_attention_dp``]. The GPUs of one stage: ``world = tp x dp``.
- ``ep``: expert parallelism: the experts split over ``ep`` GPUs, each expert's width over ``world / ep``
  (``moe_tp``) [vLLM ``--enable-expert-parallel`` (ep = world); SGLang ``--ep``; TensorRT-LLM
  ``moe_expert_parallel_size`` x ``moe_tensor_parallel_size``, e.g. "EP4TP2"]. With DP attention the tokens
  reach their experts' GPUs by an all-to-all dispatch and come back by a combine (DeepEP), in its
  low-latency mode (``a2a = "ll"``, decode) or normal mode (prefill).
- ``pp``: pipeline stages, layers split in sequence [vLLM ``--pipeline-parallel-size``]. Engines keep ``pp``
  microbatches in flight, so each sequence advances once per traversal of all stages by its microbatch;
  research code that splits a model with Hugging Face ``device_map`` runs one microbatch (``microbatches =
  1``): the layers in sequence, one GPU busy at a time.
- ``cp``: decode context parallelism: the KV cache of each sequence split over ``cp`` of the ``tp`` GPUs
  that would otherwise hold duplicate KV heads [vLLM ``--decode-context-parallel-size``].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from specsim.errors import SpecsimError

if TYPE_CHECKING:
    from specsim.cost.hardware_profile import HardwareProfile

ALLTOALL_MODES = ("ll", "normal")


@dataclass(frozen=True)
class Layout:
    tp: int = 1
    dp: int = 1
    ep: int = 1
    pp: int = 1
    cp: int = 1
    #: microbatches a pipeline keeps in flight: 0 = one per stage (engines), 1 = a layer split (device_map)
    microbatches: int = 0
    a2a: str = "ll"

    def __post_init__(self) -> None:
        for name in ("tp", "dp", "ep", "pp", "cp"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= 1024:
                raise SpecsimError(f"{name} must be a whole number 1..1024, got {v!r}")
        if self.tp > 64:
            raise SpecsimError(f"tensor parallelism must be 1..64, got {self.tp}")
        if self.world % self.ep:
            raise SpecsimError(f"ep {self.ep} must divide the GPUs of a stage (tp {self.tp} x dp {self.dp} = "
                               f"{self.world})")
        if self.tp % self.cp:
            raise SpecsimError(f"context parallelism {self.cp} must divide tp {self.tp} (vLLM's decode context "
                               f"parallelism splits the KV over GPUs of the tensor-parallel group)")
        if self.microbatches < 0:
            raise SpecsimError(f"microbatches must be >= 0, got {self.microbatches}")
        if self.a2a not in ALLTOALL_MODES:
            raise SpecsimError(f"unknown all-to-all mode {self.a2a!r} (known: {', '.join(ALLTOALL_MODES)})")

    @property
    def world(self) -> int:
        """GPUs of one pipeline stage: tp x dp."""
        return self.tp * self.dp

    @property
    def gpus(self) -> int:
        """GPUs of the whole deployment (one engine instance)."""
        return self.world * self.pp

    @property
    def moe_tp(self) -> int:
        """Tensor parallelism inside each expert: the stage's GPUs over ep."""
        return self.world // self.ep

    @property
    def in_flight(self) -> int:
        """Microbatches a pipeline keeps in flight (1 without pipelining)."""
        return self.pp if self.microbatches == 0 else min(self.microbatches, self.pp)

    @property
    def simple(self) -> bool:
        """Tensor parallelism alone (the layout of `tp`)."""
        return self == Layout(self.tp)

    def __str__(self) -> str:
        parts = [f"tp {self.tp}"]
        parts += [f"{n} {getattr(self, n)}" for n in ("dp", "ep", "pp", "cp") if getattr(self, n) > 1]
        if self.pp > 1 and self.in_flight == 1:
            parts.append("layer split")
        return ", ".join(parts)


class Placed:
    """What a target or scenario says about its GPUs, from its `tp`, `layout` (None: tp alone) and `hardware`."""

    tp: int
    layout: Layout | None
    hardware: HardwareProfile

    @property
    def gpus(self) -> int:
        """GPUs of one engine instance (a replica)."""
        return self.tp if self.layout is None else self.layout.gpus

    @property
    def where(self) -> str:
        """'8x h200' or '8x h200 (tp 1, dp 8, ep 8)'."""
        return f"{self.gpus}x {self.hardware.name}" + ("" if self.layout is None else f" ({self.layout})")


def as_layout(tp: int | Layout) -> Layout:
    """A layout from a plain tensor-parallel degree (or the layout itself)."""
    return tp if isinstance(tp, Layout) else Layout(int(tp))


def make_layout(tp: int = 1, dp: int = 1, ep: int = 1, pp: int = 1, cp: int = 1, layer_split: bool = False,
                flag: str = "--") -> Layout:
    """A layout from the flags (or fields) people write; `layer_split`: a pipeline that runs one microbatch
    (Hugging Face device_map), which needs pp > 1. `flag` prefixes the names in messages."""
    if layer_split and pp < 2:
        raise SpecsimError(f"{flag}layer-split splits the layers over {flag}pp GPUs: give {flag}pp >= 2")
    for name, v in (("tp", tp), ("dp", dp), ("ep", ep), ("pp", pp), ("cp", cp)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise SpecsimError(f"{flag}{name} must be a whole number >= 1, got {v!r}")
    return Layout(tp, dp, ep, pp, cp, 1 if layer_split else 0)


def check_layout(layout: Layout, n_experts: int, where: str = "--") -> None:
    """Expert parallelism needs experts to split: an MoE model whose experts divide evenly over ep."""
    if layout.ep > 1 and not n_experts:
        raise SpecsimError(f"{where}ep {layout.ep}: expert parallelism needs an MoE model")
    if layout.ep > 1 and n_experts % layout.ep:
        raise SpecsimError(f"{where}ep {layout.ep} must divide the model's {n_experts} experts")

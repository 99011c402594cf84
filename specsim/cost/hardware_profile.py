"""The frozen types of a hardware profile: what one accelerator can do (HardwareProfile), how close real
kernels come to its datasheet (Efficiency), its scale-up fabric (Interconnect) and which cost model times
its kernels (CostModelChoice). hardware.py loads and validates them from hardware_profiles/*.yaml;
hardware_yaml.py writes them back.

Peak rates are DENSE tensor-core figures (never the vendor's "with sparsity" headline); the
efficiency block says how close real kernels get (see roofline.py, attention.py and moe.py for how each
figure is used).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from specsim.cost.dtypes import COMPUTE_DTYPES, canonical
from specsim.errors import SpecsimError

if TYPE_CHECKING:
    from specsim.cost.hardware_yaml import ProfileYaml

#: Decode-attention kernel families (attention.attention_num_splits): how the engine's kernel on this
#: GPU splits the KV cache across CTAs. "fa2": FlashAttention-2 (vLLM's FLASH_ATTN backend on sm8x,
#: Ampere and Ada): KV split only for GQA decode (seqlenq_ngroups_swapped), 2 CTAs of 128 threads per
#: SM; "fa3": FlashAttention-3 / FlashInfer-style split-KV for every head layout, 1 CTA per SM.
#: "xqa": TensorRT-LLM's XQA decode kernel, the KV cut into sub-sequences aiming at 8 waves of CTAs.
ATTENTION_KERNELS = ("fa2", "fa3", "xqa")
#: Fused-MoE kernel families (moe.moe_gemm_s): how the engine's fused-MoE kernel tiles its grouped
#: GEMMs on this GPU. "grouped": the fastest of the GEMM tile configurations for every token count, as
#: an autotuned kernel would (vLLM's tuned Triton configs, TensorRT-LLM's CUTLASS MoE). "triton_sglang":
#: SGLang's Triton fused_moe with its default config (fused_moe_triton_config.py get_default_config,
#: bf16/fp16): BLOCK_SIZE_M 16 x N 32 x K 64 while tokens <= experts, else 64 x 64 x 32, every expert's
#: rows padded to BLOCK_SIZE_M (moe_align_block_size); (experts, N) pairs with a tuned config that SGLang
#: ships for this GPU (`moe_tuned_configs`) are priced as "grouped". "trtllm_gen": FlashInfer's TRT-LLM-gen
#: fused MoE (vLLM's FlashInfer TRT-LLM bf16 experts) as it runs without an autotuned tactic: tokens per
#: expert in tiles of tile_N = the smallest candidate of the launcher's ladder {8..128}
#: (csrc/trtllm_fused_moe_kernel_launcher.cu, computeSelectedTileN / selectDefaultTileN), 128 weight rows
#: per CTA, every token tile re-streaming its expert's weights unless they stay in L2.
MOE_KERNELS = ("grouped", "triton_sglang", "trtllm_gen")
#: A tuned SGLang fused-MoE config file name: E (experts), N (the per-GPU expert width, w2's last
#: dimension) and, for a quantised kernel, its dtype (fused_moe_triton_config.get_config_file_name).
TUNED_CONFIG_FILE = re.compile(r"E=(\d+),N=(\d+),device_name=[^,/]+?(,dtype=[^,/]+?)?(,block_shape=.*)?\.json$")
COST_MODELS = ("roofline", "table")


@dataclass(frozen=True)
class CostModelChoice:
    """Which cost model times kernels on this profile (specsim/cost/costmodel.py): the roofline, or
    measured tables interpolated where they cover a shape with the roofline outside. Tables come from
    `measurements` (a CSV in the measurement schema) or, when none is given, NVIDIA's tables of the
    installed aiconfigurator-core for this GPU and `framework`."""

    backend: str = "roofline"
    framework: str = "vllm"
    measurements: str | None = None


@dataclass(frozen=True)
class Efficiency:
    """How close real kernels come to the datasheet, and their fixed costs (roofline.py, attention.py, moe.py)."""

    gemm_compute: float = 0.75  # fraction of dense peak a large, well-tiled GEMM reaches
    memory: float = 0.90  # fraction of datasheet HBM bandwidth a streaming kernel reaches
    kernel_overhead_us: float = 4.0  # fixed cost of one kernel (launch tail, prologue, epilogue)
    ridge_sharpness: float = 2.0  # p of the p-norm joining compute and memory time (inf = max())
    cta_k_overhead: float = 64.0  # pipeline fill/drain per output tile, in K elements
    attention_compute: float = 0.55  # fraction of dense peak reached by attention's matmuls
    l2_bw_tb_per_s: float = 12.0  # L2 -> SM bandwidth, all SMs: bounds a tile's operand stream
    small_tile_efficiency: float = 1.0  # tensor-core rate of 64-row tiles relative to 128/256-row ones
    streamk_fixup_tiles: float = 0.5  # stream-K's extra work per SM for partial-tile fix-up, in tiles
    bw_ramp_ctas_frac: float = 0.05  # fraction of SMs that must hold a CTA for HBM to stream at full rate
    power_throttle: float = 0.0  # slowdown of long compute-bound kernels at the power limit (0 = none)
    throttle_tau_ms: float = 1.0  # kernel time at which half of power_throttle applies
    swap_tile_efficiency: float = 0.6  # tensor-core rate of skinny-M (swap-AB, 8..256-token) tiles vs full tiles
    splitk_overhead_us: float = 2.0  # the split-K reduction kernel (cuBLAS splitKreduce) of a split-K > 1 GEMM
    l2_resident_frac: float = 0.7  # L2 a repeated working set can hold, in units of l2_mb (benchmark replays)
    l2_stream_tb_per_s: float = 5.0  # rate a streaming kernel reads L2-resident operands (benchmark replays)
    fp8_compute: float = 0.9  # fp8 tile rate relative to gemm_compute x fp8 peak
    # Defaults below, from here to moe_expert_us: the H100-SXM fit to NVIDIA's vLLM tables (a profile
    # without a fit of its own inherits them; `specsim calibrate-tables` fits them where tables exist)
    dequant_tera_per_s: float = 11.0  # weight-only (int4/int8/fp8-on-bf16) dequantisation, T elements/s
    attention_memory: float = 0.93  # fraction of HBM bandwidth a decode-attention kernel reaches
    attention_overhead_us: float = 11.0  # fixed cost of one attention kernel
    attention_cta_us: float = 1.8  # cost of one wave of (sequence x KV head) work units over the SMs
    attention_cta_overlap: float = 1.0  # p-norm joining the work units' cost with streaming (1 = in series)
    attention_split_us: float = 2.0  # the split-KV combine kernel's cost (flash-decoding at small batch)
    attention_split_bw_loss: float = 0.1  # share of HBM bandwidth lost when few work units are split over the SMs
    attention_cta_gb_per_s: float = 1000.0  # KV one attention CTA streams alone (Little's law), GB/s
    moe_compute: float = 0.78  # fused-MoE grouped GEMM tile rate relative to a dense GEMM's
    moe_overhead_us: float = 20.0  # fixed cost of a fused MoE layer (routing, token sort/align, activation)
    moe_permute_tb_per_s: float = 2.7  # rate of gathering each token's hidden state for its experts
    moe_expert_us: float = 0.13  # setup of one active expert's block in a fused MoE kernel (serial)
    # moe_memory: "triton_sglang" and "trtllm_gen"; moe_default_tile_efficiency: "triton_sglang" only
    # (moe.moe_gemm_s); defaults from
    # the A100-SXM-80GB fit to SGLang 0.5.10's tables. Fraction of HBM bandwidth at which SGLang's Triton
    # fused MoE streams the expert weights: its many small (16 x 32) CTAs keep more loads in flight than a
    # dense GEMM's tiles (A100: ~1.72-1.79 TB/s of 2.04 at tokens <= experts, where dense GEMMs reach 0.73).
    moe_memory: float = 0.83
    # Tensor-core rate of the default config's small blocks (64 x 64 x 32 and 16 x 32 x 64, 4 warps)
    # relative to a tuned fused-MoE tile's (moe_compute): less operand reuse per load, short K steps.
    moe_default_tile_efficiency: float = 0.54
    # Fixed cost a per-tensor fp8 GEMM's activation quantisation adds beyond one streaming kernel (an engine's own fp8
    # path: TensorRT-LLM's torch-flow fp8 linear runs ~7 us more per GEMM than its bf16 one at 1-16 tokens on H100);
    # fitted per framework on the fp8 GEMM rows (block-scaled fp8 quantises per token group with another kernel).
    quant_overhead_us: float = 0.0
    # ... and its cost per token: vLLM's dynamic per-token fp8 quantisation runs one thread block a token, 5.3-6.6 ns
    # each on H100, H200 and Blackwell (NVIDIA's vLLM fp8 tables, tools/fp8_gemm.py; SGLang's < 1 ns). Default: the
    # H100-SXM vLLM fit.
    quant_row_ns: float = 5.296
    # Fraction of dense peak the mma.sync tiles of TensorRT-LLM's XQA decode kernel reach (attention._xqa_time_s;
    # a "xqa" profile only), fitted on the decode rows of NVIDIA's TensorRT-LLM tables.
    xqa_compute: float = 0.1
    xqa_cta_gb_per_s: float = 100.0  # KV one XQA CTA streams (Little's law), GB/s; fitted beside xqa_compute
    # Special-function (MUFU) slots an attention kernel spends per score element beside its matmuls: the softmax's
    # exp2 runs on the SM's 16-a-clock MUFU units, not the tensor cores (attention.softmax_s; FlashAttention-3,
    # Shah et al. 2024 sec. 3: H100's 3.9 TFLOPS of special functions against 989 of matmul). 0: not priced (a
    # profile without a prefill fit, whose attention_compute lumps it in).
    attention_softmax_ops: float = 0.0
    # Cost of one wave (one per SM) of a prefill's query-tile CTAs beyond their matmuls: Q tile load, O and LSE write
    # (attention.attention_time_s); fitted on prefill rows beside attention_compute. 0: not priced.
    attention_prefill_cta_us: float = 0.0
    source: str = "datasheet defaults"

    FITTABLE = (
        "gemm_compute",
        "memory",
        "kernel_overhead_us",
        "ridge_sharpness",
        "cta_k_overhead",
        "attention_compute",
        "l2_bw_tb_per_s",
        "small_tile_efficiency",
        "streamk_fixup_tiles",
        "bw_ramp_ctas_frac",
        "power_throttle",
        "throttle_tau_ms",
        "swap_tile_efficiency",
        "splitk_overhead_us",
        "l2_resident_frac",
        "l2_stream_tb_per_s",
        "fp8_compute",
        "dequant_tera_per_s",
        "attention_memory",
        "attention_overhead_us",
        "attention_cta_us",
        "attention_cta_overlap",
        "attention_split_us",
        "attention_split_bw_loss",
        "attention_cta_gb_per_s",
        "moe_compute",
        "moe_overhead_us",
        "moe_permute_tb_per_s",
        "moe_expert_us",
        "moe_memory",
        "moe_default_tile_efficiency",
        "quant_overhead_us",
        "quant_row_ns",
        "xqa_compute",
        "xqa_cta_gb_per_s",
        "attention_softmax_ops",
        "attention_prefill_cta_us",
    )
    NONNEGATIVE = ("power_throttle", "streamk_fixup_tiles", "splitk_overhead_us", "attention_cta_us",
                   "attention_split_bw_loss", "attention_split_us", "moe_overhead_us", "moe_expert_us",
                   "quant_overhead_us", "quant_row_ns", "attention_softmax_ops",
                   "attention_prefill_cta_us")
    FRACTIONS = ("gemm_compute", "memory", "attention_compute", "small_tile_efficiency", "bw_ramp_ctas_frac",
                 "swap_tile_efficiency", "fp8_compute", "attention_memory", "moe_compute", "moe_memory",
                 "moe_default_tile_efficiency", "xqa_compute")


@dataclass(frozen=True)
class Interconnect:
    """Scale-up fabric per GPU; all-reduce time = latency + 2(n-1)/n * bytes / busbw (NCCL docs).

    `allreduce_by_world_size` maps a GPU count to its own fitted (latency_s, busbw_bytes_per_s,
    sharpness), the p of the p-norm joining latency and transfer (roofline.allreduce_time_s).
    """

    kind: str
    link_bw_bytes_per_s: float
    allreduce_busbw_bytes_per_s: float
    allreduce_latency_s: float
    allreduce_by_world_size: dict[int, tuple[float, float, float]] = field(default_factory=dict)
    #: Other all-reduce implementations (ALLREDUCE_IMPLEMENTATIONS less "nccl", which is the fields
    #: above): {impl: {n: (latency_s, busbw_bytes_per_s, sharpness)}}; an implementation or GPU count
    #: missing here falls back to eager NCCL's figures (roofline.allreduce_time_s).
    allreduce_by_implementation: dict[str, dict[int, tuple[float, float, float]]] = field(default_factory=dict)
    #: MoE all-to-all (expert-parallel dispatch + combine, specsim/cost/alltoall.py): {implementation
    #: ("deepep" | "vllm" | "trtllm"): {mode ("ll" | "normal"): parameters}}: for "deepep"
    #: (dispatch_latency_s, dispatch_efficiency, combine_latency_s, combine_efficiency), for a framework
    #: alltoall.ALLTOALL_FRAMEWORK_PARAMS; efficiencies are fractions of link_bw_bytes_per_s. An
    #: implementation or mode missing here borrows the nearest covered GPU's (alltoall.NEAREST_COVERED).
    alltoall: dict[str, dict[str, tuple[float, ...]]] = field(default_factory=dict)


@dataclass(frozen=True)
class FrameworkKernels:
    """One framework's kernels on a GPU: the efficiencies fitted to its tables (a whole `Efficiency`), the in-graph
    all-reduce it runs ({impl: {n: (latency_s, busbw_bytes_per_s, sharpness)}}), its decode-attention kernel family
    and GEMM tile dispatch where they differ from the profile's (ATTENTION_KERNELS, gemm_dispatch.DISPATCH; "" / None
    = the profile's), and where they come from."""

    efficiency: Efficiency
    allreduce_by_implementation: dict[str, dict[int, tuple[float, float, float]]] = field(default_factory=dict)
    source: str = ""
    attention_kernel: str = ""
    gemm_dispatch: dict[str, str] | None = None  # None: the profile's


#: All-reduce implementations a caller chooses among: eager NCCL called op by op (PyTorch eager, the
#: Vidur network files), NCCL captured in a CUDA graph, and an engine's custom all-reduce (vLLM /
#: SGLang custom AR, TensorRT-LLM AUTO one-/two-shot) captured in a CUDA graph.
ALLREDUCE_IMPLEMENTATIONS = ("nccl", "nccl_graph", "custom")


@dataclass(frozen=True)
class HardwareProfile:
    name: str
    description: str
    vendor: str
    sm_count: int
    clock_mhz: float
    memory_bytes: float
    mem_bw_bytes_per_s: float
    l2_bytes: float
    peak_flops_per_s: dict[str, float | None]
    interconnect: Interconnect
    launch_overhead_s: float
    efficiency: Efficiency = field(default_factory=Efficiency)
    provenance: dict[str, Any] = field(default_factory=dict)
    source_path: str = ""
    #: The memory an engine sees (CUDA's total, what vLLM's gpu_memory_utilization multiplies), in
    #: bytes; profiles state it in GiB (`memory_gib`); without it, the datasheet GB read as GiB.
    total_memory_bytes: float = 0.0
    cost_model: CostModelChoice = field(default_factory=CostModelChoice)
    #: The decode-attention kernel family the engine runs on this GPU (ATTENTION_KERNELS).
    attention_kernel: str = "fa3"
    #: The fused-MoE kernel family the engine runs on this GPU (MOE_KERNELS).
    moe_kernel: str = "grouped"
    #: Tensor-core dtype -> the fixed tile dispatch the engine's GEMM of that dtype runs (gemm_dispatch.DISPATCH;
    #: none: the best configuration, as an autotuned library picks).
    gemm_dispatch: dict[str, str] = field(default_factory=dict)
    #: "triton_sglang": the tuned config files SGLang ships for this GPU (paths in sgl-project/sglang);
    #: bf16/fp16 (E, N) pairs in `moe_tuned_shapes`.
    moe_tuned_configs: tuple[str, ...] = ()
    #: Each engine's own kernels (issue 22): {framework: its fitted parameters}, fitted to NVIDIA's tables of that
    #: framework; the profile's own `efficiency` and all-reduce are vLLM's (the tables it was fitted to).
    frameworks: dict[str, FrameworkKernels] = field(default_factory=dict)
    #: A "xqa" framework's decode kernel for heads wider than XQA and MMHA take (MLA's 576-wide latent), as
    #: (efficiencies, kernel family): TensorRT-LLM's MLA generation runs FlashMLA on Hopper and its trtllm-gen MLA
    #: kernels on sm100 (attention.XQA_MAX_HEAD_DIM), split-KV kernels of the family the GPU's own (vLLM) fit
    #: describes (FA3 on Hopper, FlashInfer's trtllm-gen decode on Blackwell), not the XQA / MMHA rows the
    #: framework's block was fitted to. Set by `for_framework`; None: the profile's own attention prices them.
    split_kv: tuple[Efficiency, str] | None = None

    def __post_init__(self) -> None:
        if not self.total_memory_bytes:
            object.__setattr__(self, "total_memory_bytes", self.memory_bytes / 1e9 * 2**30)

    def for_framework(self, framework: str) -> HardwareProfile:
        """The profile as `framework`'s kernels run on this GPU: its fitted efficiencies and in-graph all-reduce
        where the profile holds them (`frameworks`), else the profile itself; under the table cost model, that
        framework's measured tables (framework '' for an engine with none: the roofline, said so). The same object
        each call (the cost model's memos key on a profile's identity)."""
        kernels = self.frameworks.get(framework)
        tables = self.cost_model.backend == "table" and self.cost_model.framework != framework
        if kernels is None and not tables:
            return self
        # derived profiles live beside the fields (not one: `dataclasses.replace` and `asdict` leave them out)
        derived: dict[str, HardwareProfile] = self.__dict__.setdefault("_derived", {})
        if (hit := derived.get(framework)) is not None:
            return hit
        # not with_cost_model: it reads framework '' as "the profile's default"
        choice = dataclasses.replace(self.cost_model, framework=framework) if tables else self.cost_model
        if kernels is None:
            out = dataclasses.replace(self, cost_model=choice)
        else:
            ic = self.interconnect
            impls = {**ic.allreduce_by_implementation}
            for impl, table in kernels.allreduce_by_implementation.items():
                impls[impl] = {**impls.get(impl, {}), **table}
            kernel = kernels.attention_kernel or self.attention_kernel
            # FlashMLA (sm90) and trtllm-gen MLA (sm100) are split-KV kernels like the GPU's own "fa3" decode; on
            # sm8x / sm120 ("fa2" profiles) TensorRT-LLM's MLA generation is neither and stays on the block's fit
            split_kv = (self.efficiency, self.attention_kernel) \
                if kernel == "xqa" and self.attention_kernel == "fa3" else None
            out = dataclasses.replace(self, efficiency=kernels.efficiency, frameworks={}, split_kv=split_kv,
                                      interconnect=dataclasses.replace(ic, allreduce_by_implementation=impls),
                                      attention_kernel=kernel,
                                      gemm_dispatch=self.gemm_dispatch if kernels.gemm_dispatch is None
                                      else kernels.gemm_dispatch, cost_model=choice)
        derived[framework] = out
        return out

    @property
    def is_hopper(self) -> bool:
        """An NVIDIA Hopper GPU (H100, H200, H20, H800, GH200): where engines default to FlashAttention-3."""
        return self.vendor == "nvidia" and bool(re.search(r"\b(GH200|H100|H200|H20|H800)\b", self.description))

    @property
    def moe_tuned_shapes(self) -> frozenset[tuple[float, float]]:
        """(experts, N) pairs of the 16-bit tuned configs in `moe_tuned_configs` (files without a dtype
        selector: SGLang's bf16/fp16 kernels; quantised configs name their dtype)."""
        out = set()
        for path in self.moe_tuned_configs:
            m = TUNED_CONFIG_FILE.search(path)
            if m and not m.group(3):
                out.add((float(m.group(1)), float(m.group(2))))
        return frozenset(out)

    def peak(self, dtype: str) -> float:
        """Dense peak FLOP/s for a compute dtype; SpecsimError when the GPU lacks it."""
        key = canonical(dtype)
        if key not in self.peak_flops_per_s:
            raise SpecsimError(f"unknown compute dtype '{dtype}' (known: {', '.join(COMPUTE_DTYPES)})")
        value = self.peak_flops_per_s[key]
        if value is None:
            raise SpecsimError(f"{self.name} has no {key} tensor cores (peak_tflops.{key} is null)")
        return value

    def with_efficiency(self, **changes: float) -> HardwareProfile:
        fields: dict[str, Any] = dict(changes)  # the float fields of Efficiency (not `source`)
        return dataclasses.replace(self, efficiency=dataclasses.replace(self.efficiency, **fields))

    def with_cost_model(self, backend: str, framework: str | None = None,
                        measurements: str | None = None) -> HardwareProfile:
        """The profile with another cost model (`--cost-model`); SpecsimError for an unknown one."""
        if backend not in COST_MODELS:
            raise SpecsimError(f"unknown cost model '{backend}' (known: {', '.join(COST_MODELS)})")
        choice = CostModelChoice(backend, framework or self.cost_model.framework,
                                 measurements if measurements is not None else self.cost_model.measurements)
        return dataclasses.replace(self, cost_model=choice)

    def to_yaml_dict(self) -> ProfileYaml:
        """The profile in the YAML schema it was read from (for fitted profiles; hardware_yaml.py)."""
        from specsim.cost.hardware_yaml import profile_yaml_dict  # writing is the edge: it needs these types

        return profile_yaml_dict(self)

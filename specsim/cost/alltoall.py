"""The MoE all-to-all of expert parallelism: dispatch (each token to the ranks holding its top-k
experts) and combine (the experts' outputs back), as DeepEP runs them under EP with data-parallel
attention: "ll", the low-latency kernels of decode, and "normal", the high-throughput kernels of prefill
(github.com/deepseek-ai/DeepEP README, "Low-latency kernels" / "Normal kernels").

Each phase costs a fixed latency plus the bytes that leave the rank over its scale-up bandwidth at a
fitted efficiency; the per-(GPU, mode) parameters live in the profile (`interconnect.alltoall`,
fitted to NVIDIA's DeepEP tables by specsim/calibration/alltoall.py). A GPU without them borrows the
latency and efficiency of the nearest GPU that has them, applied to its own link bandwidth
(`NEAREST_COVERED`).

The model covers one scale-up domain (NVLink / xGMI): NVIDIA's single-node tables (EP 8 on HGX
boards, EP 4 on a GB200/GB300 tray) are what the parameters are fitted on. Few experts per rank are
outside it: DeepEP's LL kernels give each expert one SM, so with 8 or 16 experts only 8 or 16 SMs move
the data (SGLang 0.5.12 H200 table: 29-180 GB/s instead of ~250); the fit uses tables with >= 64 experts.

Engines run DeepEP through their own code, and each has its table: `impl` picks the implementation.
"deepep" is DeepEP's kernels alone (SGLang's tables run DeepEP's own tests, GPU kernel time). "vllm"
is vLLM's DeepEP prepare/finalize (vllm/model_executor/layers/fused_moe/prepare_finalize/deepep_ll.py,
deepep_ht.py, called by NVIDIA's collector ai-dynamo/aiconfigurator@ff3fec02
collector/wideep/vllm/collect_moe_a2a.py, bf16 dispatch); "trtllm" is TensorRT-LLM's DeepEP /
DeepEPLowLatency communication backends (collector/wideep/trtllm/collect_moe_a2a.py, forced through
CommunicationFactory). Both collectors time the framework's call with CUDA events, eagerly (no CUDA
graph): the host-side launch and layout work, the op's own pre/post-processing and, for the normal
kernels, the CPU wait on DeepEP's receive counts are inside. Each framework phase is DeepEP's kernel
(its latency; the bytes at the framework's fitted efficiency, never above DeepEP's, plus a fitted
per-copy cost) joined with a fitted framework overhead by a p-norm (`sharpness`: 1 adds them, large
values take the larger), so a framework is never cheaper than raw DeepEP. Caveat: the overhead was
measured eagerly; a pass replayed from a CUDA graph (LL decode) hides the host part of it.
"""

from __future__ import annotations

import functools

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.cost.hardware_profile import HardwareProfile
from specsim.errors import SpecsimError

Array = NDArray[np.float64]

ALLTOALL_MODES = ("ll", "normal")
#: Who runs the all-to-all: DeepEP's kernels alone, vLLM's or TensorRT-LLM's DeepEP path (module doc).
ALLTOALL_IMPLEMENTATIONS = ("deepep", "vllm", "trtllm")
#: The order of one DeepEP mode's parameters (Interconnect.alltoall["deepep"][mode]): seconds and
#: fractions of the rank's scale-up bandwidth (interconnect.link_bw_bytes_per_s, per direction).
ALLTOALL_PARAMS = ("dispatch_latency_s", "dispatch_efficiency", "combine_latency_s", "combine_efficiency")
#: The order of one framework mode's parameters (Interconnect.alltoall["vllm" | "trtllm"][mode]):
#: overheads in seconds, efficiencies as above (capped at DeepEP's), the p of the p-norm joining the
#: overhead and DeepEP's kernel, and the per-copy costs of dispatch and combine in seconds.
ALLTOALL_FRAMEWORK_PARAMS = ("dispatch_overhead_s", "dispatch_efficiency", "combine_overhead_s",
                             "combine_efficiency", "sharpness", "dispatch_copy_s", "combine_copy_s")

#: GPUs without NVIDIA tables -> the covered profile whose fitted latency and efficiency they borrow
#: (applied to their own link bandwidth). Rule: Blackwell-generation parts (sm_100/sm_120) borrow
#: B200's fit; Hopper, Ampere, Ada and everything else H100-SXM's (DeepEP's LL/normal kernels were
#: written for and tuned on Hopper NVLink, github.com/deepseek-ai/DeepEP README). AMD MI300X/MI325X/
#: MI355X run MoRI / DeepEP-like kernels on ROCm (aiconfigurator collector/deep_collector/
#: test_low_latency_mori.py) over xGMI: 7 point-to-point links of 64 GB/s per direction, 448 GB/s
#: aggregate (/work/shared/research/hardware.md, MI300X row, MLE network tables), so an EP group of
#: n <= 8 ranks reaches (n - 1) / 7 of it (`_scale_up_bw`).
NEAREST_COVERED: dict[str, str] = {"rtx-5090": "b200", "rtx-pro-6000": "b200", "mi355x": "b200"}
DEFAULT_COVERED = "h100-sxm"


@functools.cache
def _borrowed(name: str) -> dict[str, dict[str, tuple[float, ...]]]:
    from specsim.cost.hardware import load_hardware  # the fallback reads a bundled profile

    return {impl: dict(modes) for impl, modes in load_hardware(name).interconnect.alltoall.items()}


def _check(mode: str, impl: str) -> None:
    if mode not in ALLTOALL_MODES:
        raise SpecsimError(f"unknown all-to-all mode {mode!r} (known: {', '.join(ALLTOALL_MODES)})")
    if impl not in ALLTOALL_IMPLEMENTATIONS:
        raise SpecsimError(f"unknown all-to-all implementation {impl!r} "
                           f"(known: {', '.join(ALLTOALL_IMPLEMENTATIONS)})")


def alltoall_params(hw: HardwareProfile, mode: str, impl: str = "deepep") -> tuple[float, ...]:
    """`impl`'s parameters of `mode` on `hw` (ALLTOALL_PARAMS for "deepep", ALLTOALL_FRAMEWORK_PARAMS
    for a framework): its own fit, else the nearest covered GPU's (NEAREST_COVERED)."""
    _check(mode, impl)
    own = hw.interconnect.alltoall.get(impl, {}).get(mode)
    if own is not None:
        return own
    donor = NEAREST_COVERED.get(hw.name, DEFAULT_COVERED)
    params = _borrowed(donor).get(impl, {}).get(mode) if donor != hw.name else None
    if params is None:
        raise SpecsimError(f"{hw.name}: no {impl} all-to-all parameters for mode {mode!r}, nor in {donor}")
    return params


def _scale_up_bw(hw: HardwareProfile, ep: int) -> float:
    """Per-direction bandwidth a rank's all-to-all traffic gets: the link bandwidth behind a switch
    (NVSwitch: every rank reaches the full per-GPU NVLink bandwidth); on xGMI's full mesh only the
    links to the ep - 1 peers carry traffic (7 links per GPU; hardware.md, MI300X)."""
    bw = hw.interconnect.link_bw_bytes_per_s
    if hw.interconnect.kind.lower().startswith("xgmi"):
        bw *= min(ep - 1, 7) / 7
    return bw


def dispatch_message_bytes(hidden: float, dispatch_bytes: float) -> float:
    """Bytes of one token copy in a dispatch: the hidden state, its fp8 scales (one fp32 per 128
    channels) when the payload is 1-byte fp8 (give a 4-bit payload with its scales, e.g. nvfp4 =
    0.5 + 1/16), and DeepEP's 16-byte header (DeepEP tests/test_low_latency.py:
    num_fp8_bytes = hidden + hidden / 128 * 4 + 16)."""
    scales = hidden / 128 * 4 if dispatch_bytes == 1 else 0.0
    return hidden * dispatch_bytes + scales + 16.0


def alltoall_phases_s(hw: HardwareProfile, tokens_per_rank: ArrayLike, hidden: float, top_k: float, ep: int,
                      mode: str = "ll", dispatch_bytes: float = 1.0, combine_bytes: float = 2.0,
                      impl: str = "deepep") -> tuple[Array, Array]:
    """(dispatch, combine) seconds on one rank; alltoall_time_s is their sum (see there)."""
    tokens = np.asarray(tokens_per_rank, dtype=float)
    lat_d, eff_d, lat_c, eff_c = alltoall_params(hw, mode)
    framework = alltoall_params(hw, mode, impl) if impl != "deepep" else None
    if ep <= 1:
        return np.zeros_like(tokens), np.zeros_like(tokens)
    bw = _scale_up_bw(hw, ep)
    # ll: one copy per selected expert (DeepEP README: LL kernels send every token straight to each of
    # its experts' ranks, IBGDA / NVLink), (ep - 1) / ep of them leaving the rank. normal: one copy per
    # destination RANK holding any of the token's experts (DeepEP get_dispatch_layout,
    # is_token_in_rank), the top-k experts taken as independent uniform draws over the ranks
    copies = tokens * (float(top_k) * (ep - 1) / ep if mode == "ll"
                       else (ep - 1) * (1.0 - (1.0 - 1.0 / ep) ** float(top_k)))
    message_d = dispatch_message_bytes(hidden, dispatch_bytes)
    message_c = float(hidden) * combine_bytes
    if framework is None:
        # each phase: latency + bytes / (efficiency x scale-up bandwidth), fitted per mode to NVIDIA's
        # DeepEP tables (aiconfigurator-core; specsim/calibration/alltoall.py)
        # (an EP rank with no tokens still joins both collectives: the latency stays)
        dispatch = lat_d + copies * message_d / (eff_d * bw)
        combine = lat_c + copies * message_c / (eff_c * bw)
        return np.asarray(dispatch, dtype=float), np.asarray(combine, dtype=float)
    over_d, f_eff_d, over_c, f_eff_c, p, copy_d, copy_c = framework
    # the framework's DeepEP kernels: DeepEP's latency, the bytes at the framework's efficiency (capped
    # at DeepEP's, so never cheaper) plus its per-copy cost, then p-norm-joined with its overhead
    kernel_d = lat_d + copies * (copy_d + message_d / (min(f_eff_d, eff_d) * bw))
    kernel_c = lat_c + copies * (copy_c + message_c / (min(f_eff_c, eff_c) * bw))
    dispatch = (over_d ** p + kernel_d ** p) ** (1.0 / p)
    combine = (over_c ** p + kernel_c ** p) ** (1.0 / p)
    return np.asarray(dispatch, dtype=float), np.asarray(combine, dtype=float)


def alltoall_time_s(hw: HardwareProfile, tokens_per_rank: ArrayLike, hidden: float, top_k: float, ep: int,
                    mode: str = "ll", dispatch_bytes: float = 1.0, combine_bytes: float = 2.0,
                    impl: str = "deepep") -> Array:
    """Dispatch + combine seconds of one MoE layer on one rank, each rank sending `tokens_per_rank`
    tokens (broadcasts over arrays). `dispatch_bytes` / `combine_bytes`: bytes per hidden element
    (DeepEP LL dispatches fp8 with scales and combines bf16). `impl`: who runs it (deepep | vllm |
    trtllm, ALLTOALL_IMPLEMENTATIONS; an engine profile's `alltoall` field). `ep <= 1` is no
    all-to-all: zeros; an unknown mode or implementation is a SpecsimError.

    Bytes leaving a rank per phase, `message` = dispatch_message_bytes or hidden x combine_bytes:
      ll:     tokens x top_k x (ep - 1) / ep x message
      normal: tokens x (ep - 1) x (1 - (1 - 1/ep)^top_k) x message
    and each DeepEP phase costs latency + bytes / (efficiency x scale-up bandwidth) (alltoall_params);
    a framework phase is (overhead^p + kernel^p)^(1/p), its kernel DeepEP's latency + copies x
    (copy cost + message / (min(its efficiency, DeepEP's) x bandwidth)) (module doc).
    """
    dispatch, combine = alltoall_phases_s(hw, tokens_per_rank, hidden, top_k, ep, mode, dispatch_bytes,
                                          combine_bytes, impl)
    return np.asarray(dispatch + combine, dtype=float)

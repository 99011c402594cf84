"""The bundled microbenchmark runner: times the kernels the cost model predicts, with PyTorch.

What it measures (rows in the measurement schema, measurements.py):
  * GEMMs of the model's linear layers under tensor parallelism (y = x @ W^T, as nn.Linear runs
    them), over a sweep of token counts 1..8192, dense below 512;
  * decode and verification attention, B sequences x q new tokens over a KV cache of L tokens, with
    PyTorch SDPA, and FlashAttention / FlashInfer when they are installed (CUDA);
  * device memory-copy bandwidth (bytes = read + written), a large matmul for the peak rate;
  * NCCL all-reduce when several GPUs are visible.

Timing: on CUDA, CUDA events around each call, after warm-up, with input buffers rotated through
more bytes than twice the L2 so that no repeat runs from cache, the median of the repeats, clocks
left as they are. On CPU, perf_counter around each call, the same rotation against the last-level
cache. Both backends share every other line of code, so the CPU path (which runs everywhere,
including CI) exercises the sweep, rotation, statistics and writing.

PyTorch is an optional extra (`pip install ".[bench]"`): it is imported inside functions only.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import platform
import re
import socket
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specsim.cost.dtypes import TORCH_NAMES
from specsim.cost.model import ModelSpec
from specsim.errors import SpecsimError

OPS = ("gemm", "attention", "memcpy", "peak", "allreduce")
DTYPES = TORCH_NAMES
# Token counts: every count to 16, then steps of 8 to 512 (where decode and verification live),
# then a coarser sweep to 8192.
FULL_TOKENS = (*range(1, 17), *range(24, 513, 8), 576, 640, 768, 896, 1024, 1280, 1536, 2048, 3072, 4096, 6144, 8192)
QUICK_TOKENS = (1, 16, 128)
# GPU names (torch.cuda.get_device_name) -> bundled profile names.
_PROFILE_NAMES = (
    (r"H100.*PCIe", "h100-pcie"), (r"H100", "h100-sxm"), (r"H200", "h200"), (r"B200", "b200"),
    (r"A100.*40GB", "a100-sxm-40gb"), (r"A100", "a100-sxm-80gb"), (r"L40S", "l40s"), (r"MI300X", "mi300x"),
)


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise SpecsimError("specsim bench needs PyTorch: pip install \".[bench]\" (or pip install torch)") from None
    return torch


def profile_name(device_name: str) -> str:
    """A bundled profile name for a GPU name, else a slug of the name."""
    for pattern, name in _PROFILE_NAMES:
        if re.search(pattern, device_name, re.IGNORECASE):
            return name
    return re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-") or "unknown"


# --------------------------------------------------------------------------------------------------
# Shapes


def linear_shapes(model: ModelSpec, tp: int) -> list[tuple[str, int, int]]:
    """(name, K, N) of one layer's linear ops on one GPU (Megatron column/row split), plus the LM head."""
    h = model.hidden
    heads = model.n_heads / tp
    branches = 2 if model.gated_mlp else 1
    if model.is_mla:
        qk = model.qk_nope_head_dim + model.qk_rope_head_dim
        shapes = [("q_a", h, model.q_lora_rank), ("q_b", model.q_lora_rank, heads * qk),
                  ("kv_a", h, model.kv_lora_rank + model.qk_rope_head_dim), ("o", heads * model.v_head_dim, h)]
    else:
        kvh = max(model.n_kv_heads / tp, 1.0)
        shapes = [("qkv", h, (heads + 2 * kvh) * model.head_dim), ("o", heads * model.head_dim, h)]
    inter = (model.moe_intermediate if model.is_moe else model.intermediate) / tp
    shapes += [("up", h, branches * inter), ("down", inter, h), ("lm_head", h, model.vocab / tp)]
    return [(name, int(k), int(n)) for name, k, n in shapes if k >= 1 and n >= 1]


def attention_configs(quick: bool) -> list[tuple[int, int, int]]:
    """(batch, context, new tokens per sequence): decode (q = 1) and verification (q > 1)."""
    if quick:
        return [(b, ctx, q) for b in (1, 8) for ctx in (256, 1024) for q in (1, 4)]
    return [(b, ctx, q) for b in (1, 4, 16, 64) for ctx in (512, 2048, 8192, 32768) for q in (1, 2, 4, 8)]


# --------------------------------------------------------------------------------------------------
# Timing (shared by both backends)


@dataclass
class Backend:
    """Where kernels run and how they are timed."""

    torch: Any
    device: str  # "cuda" | "cpu"
    warmup: int
    repeats: int
    flush_bytes: float  # rotate inputs through at least this many bytes (2x L2 / last-level cache)
    budget_bytes: float  # never allocate more than this for one measurement's buffers

    def sync(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def n_sets(self, set_bytes: float) -> int:
        """Copies of the inputs to rotate through: enough to exceed flush_bytes, within the budget."""
        want = math.ceil(self.flush_bytes / max(set_bytes, 1.0))
        fit = int(self.budget_bytes // max(set_bytes, 1.0))
        return max(1, min(want, fit, 64))

    def time(self, fn: Callable[[int], Any], n_sets: int) -> list[float]:
        """Seconds per call of fn(i), i cycling over the input sets; warm-up calls are not timed."""
        for i in range(self.warmup):
            fn(i % n_sets)
        self.sync()
        if self.device == "cuda":
            cuda = self.torch.cuda
            start = [cuda.Event(enable_timing=True) for _ in range(self.repeats)]
            end = [cuda.Event(enable_timing=True) for _ in range(self.repeats)]
            if hasattr(cuda, "_sleep"):
                cuda._sleep(2_000_000)  # let the host queue all repeats before the GPU reaches them
            for r in range(self.repeats):
                start[r].record()
                fn((self.warmup + r) % n_sets)
                end[r].record()
            cuda.synchronize()
            return [s.elapsed_time(e) * 1e-3 for s, e in zip(start, end, strict=True)]
        out = []
        for r in range(self.repeats):
            t0 = time.perf_counter()
            fn((self.warmup + r) % n_sets)
            out.append(time.perf_counter() - t0)
        return out


def _stats(times_s: list[float]) -> dict[str, float]:
    ms = [t * 1e3 for t in times_s]
    return {"time_ms": statistics.median(ms), "std_ms": statistics.pstdev(ms) if len(ms) > 1 else 0.0,
            "repeats": len(ms)}


def _cache_bytes_cpu() -> float:
    """Largest CPU cache (bytes) from sysfs, else 32 MiB."""
    best = 0.0
    for p in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        m = re.match(r"(\d+)([KMG]?)", p.read_text().strip())
        if m:
            best = max(best, int(m.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[m.group(2)])
    return best or 32 * 2**20


def make_backend(device: str, quick: bool) -> Backend:
    torch = _torch()
    if device == "cuda":
        if not torch.cuda.is_available():
            raise SpecsimError("--device cuda: no CUDA device visible to PyTorch (try --device cpu)")
        props = torch.cuda.get_device_properties(0)
        l2 = float(getattr(props, "L2_cache_size", 0) or 50 * 2**20)
        free, _ = torch.cuda.mem_get_info()
        return Backend(torch, "cuda", warmup=3 if quick else 10, repeats=10 if quick else 50,
                       flush_bytes=2.0 * l2, budget_bytes=min(0.25 * free, 4 * 2**30))
    if device != "cpu":
        raise SpecsimError(f"--device must be cuda or cpu, got {device!r}")
    return Backend(torch, "cpu", warmup=1, repeats=3 if quick else 7,
                   flush_bytes=2.0 * _cache_bytes_cpu(), budget_bytes=(256 if quick else 1024) * 2**20)


# --------------------------------------------------------------------------------------------------
# The measurements


@dataclass
class Job:
    label: str
    run: Callable[[], list[dict[str, Any]]]


@dataclass
class BenchResult:
    rows: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    interrupted: bool = False


def _gemm_job(be: Backend, dt_: Any, dtype: str, name: str, m: int, k: int, n: int, extra: dict[str, Any]) -> Job:
    def run() -> list[dict[str, Any]]:
        torch = be.torch
        elem = torch.finfo(dt_).bits // 8
        sets = be.n_sets((m * k + n * k) * elem)
        x0 = torch.randn(m, k, dtype=dt_, device=be.device)
        w0 = torch.randn(n, k, dtype=dt_, device=be.device) * 0.02
        xs = [x0, *(x0.clone() for _ in range(sets - 1))]  # same values, separate memory: cold caches
        ws = [w0, *(w0.clone() for _ in range(sets - 1))]
        lin = torch.nn.functional.linear
        with torch.inference_mode():
            times = be.time(lambda i: lin(xs[i], ws[i]), sets)
        return [{"op": "gemm", "dtype": dtype, "tokens": m, "d_in": k, "d_out": n, **_stats(times),
                 "layer_op": name, "kernel": "torch.nn.functional.linear", "buffer_sets": sets, **extra}]

    return Job(f"gemm {name} M={m} K={k} N={n}", run)


def _attention_backends(be: Backend) -> list[str]:
    names = ["sdpa"]
    if be.device == "cuda":
        for module, label in (("flash_attn", "flash_attn"), ("flashinfer", "flashinfer")):
            try:
                __import__(module)
                names.append(label)
            except ImportError:
                pass
    return names


def _attention_job(be: Backend, dt_: Any, dtype: str, model: ModelSpec, tp: int, b: int, ctx: int, q: int,
                   kernel: str, extra: dict[str, Any], skipped: list[str]) -> Job:
    heads = max(round(model.n_heads / tp), 1)
    kvh = max(round(model.n_kv_heads / tp), 1)
    hd = model.head_dim

    def run() -> list[dict[str, Any]]:
        torch = be.torch
        elem = torch.finfo(dt_).bits // 8
        set_bytes = (b * q * heads * hd + 2 * b * ctx * kvh * hd) * elem
        if set_bytes > be.budget_bytes:
            return []  # does not fit this machine's budget: skipped, not faked
        sets = be.n_sets(set_bytes)
        mk = lambda *shape: torch.randn(*shape, dtype=dt_, device=be.device)  # noqa: E731  (small: KV is the bulk)
        try:
            fn = _attention_fn(torch, kernel, mk, sets, b, ctx, q, heads, kvh, hd, be.device)
            with torch.inference_mode():
                times = be.time(fn, sets)
        except (RuntimeError, TypeError, ValueError) as exc:
            if kernel == "sdpa":
                raise
            # an optional library that cannot run this shape (head size, dtype, version): skip, say why
            skipped.append(f"{kernel} B={b} L={ctx} q={q}: {str(exc).splitlines()[0][:120]}")
            return []
        return [{"op": "attention", "dtype": dtype, "batch": b, "context_len": ctx, "q_per_seq": q,
                 "n_heads": heads, "n_kv_heads": kvh, "head_dim": hd, **_stats(times), "kernel": kernel,
                 "buffer_sets": sets, **extra}]

    return Job(f"attention {kernel} B={b} L={ctx} q={q}", run)


def _attention_fn(torch: Any, kernel: str, mk: Callable[..., Any], sets: int, b: int, ctx: int, q: int,
                  heads: int, kvh: int, hd: int, device: str) -> Callable[[int], Any]:
    """One attention call over set i: q new tokens per sequence attend to the ctx cached tokens,
    causally among themselves (the last new token sees everything: bottom-right aligned mask)."""
    if kernel == "sdpa":
        sdpa = torch.nn.functional.scaled_dot_product_attention
        qs = [mk(b, heads, q, hd) for _ in range(sets)]
        ks = [mk(b, kvh, ctx, hd) for _ in range(sets)]
        vs = [mk(b, kvh, ctx, hd) for _ in range(sets)]
        mask = None
        if q > 1:
            i = torch.arange(q, device=device)[:, None]
            j = torch.arange(ctx, device=device)[None, :]
            mask = j <= ctx - q + i
        if kvh == heads:
            return lambda s: sdpa(qs[s], ks[s], vs[s], attn_mask=mask)
        if "enable_gqa" in (sdpa.__doc__ or ""):  # torch >= 2.5 shares each KV head among its query group
            return lambda s: sdpa(qs[s], ks[s], vs[s], attn_mask=mask, enable_gqa=True)
        # older torch: expand the KV heads once, outside the timed call
        ks = [k.repeat_interleave(heads // kvh, dim=1) for k in ks]
        vs = [v.repeat_interleave(heads // kvh, dim=1) for v in vs]
        return lambda s: sdpa(qs[s], ks[s], vs[s], attn_mask=mask)
    if kernel == "flash_attn":
        from flash_attn import flash_attn_with_kvcache  # CUDA only; causal is bottom-right aligned

        qs = [mk(b, q, heads, hd) for _ in range(sets)]
        ks = [mk(b, ctx, kvh, hd) for _ in range(sets)]
        vs = [mk(b, ctx, kvh, hd) for _ in range(sets)]
        return lambda s: flash_attn_with_kvcache(qs[s], ks[s], vs[s], causal=True)
    if kernel == "flashinfer":
        import flashinfer  # CUDA only: one sequence at a time is what its single-request API times

        qs = [mk(q, heads, hd) for _ in range(sets)]
        ks = [mk(ctx, kvh, hd) for _ in range(sets)]
        vs = [mk(ctx, kvh, hd) for _ in range(sets)]
        if q == 1:
            return lambda s: [flashinfer.single_decode_with_kv_cache(qs[s][0], ks[s], vs[s]) for _ in range(b)]
        return lambda s: [flashinfer.single_prefill_with_kv_cache(qs[s], ks[s], vs[s], causal=True) for _ in range(b)]
    raise SpecsimError(f"unknown attention kernel {kernel!r}")


def _memcpy_job(be: Backend, size: int, extra: dict[str, Any]) -> Job:
    def run() -> list[dict[str, Any]]:
        torch = be.torch
        if 2 * size > be.budget_bytes:
            return []
        sets = be.n_sets(2 * size)
        src = [torch.empty(size, dtype=torch.uint8, device=be.device).fill_(1) for _ in range(sets)]
        dst = [torch.empty(size, dtype=torch.uint8, device=be.device) for _ in range(sets)]
        times = be.time(lambda i: dst[i].copy_(src[i]), sets)
        return [{"op": "memcpy", "bytes": 2 * size, **_stats(times), "kernel": "copy_", "buffer_sets": sets, **extra}]

    return Job(f"memcpy {size / 2**20:g} MiB", run)


def _allreduce_rows(be: Backend, quick: bool, extra: dict[str, Any]) -> list[Job]:
    """NCCL all-reduce over 2, 4, 8 ... visible GPUs, one process per GPU (torch.multiprocessing)."""
    torch = be.torch
    if be.device != "cuda" or torch.cuda.device_count() < 2:
        return []
    sizes = [2**p for p in ((12, 20, 24) if quick else range(10, 29, 2))]
    worlds = [w for w in (2, 4, 8, 16) if w <= torch.cuda.device_count()]
    jobs = []
    for w in worlds:
        def run(w: int = w) -> list[dict[str, Any]]:
            return [{"op": "allreduce", "dtype": "bf16", "bytes": s, "world_size": w, **st, "kernel": "nccl",
                     **extra} for s, st in _spawn_allreduce(w, sizes, be.warmup, be.repeats)]

        jobs.append(Job(f"all-reduce over {w} GPUs", run))
    return jobs


def _spawn_allreduce(world: int, sizes: list[int], warmup: int, repeats: int) -> list[tuple[int, dict[str, float]]]:
    _torch()
    import torch.multiprocessing as mp

    with socket.socket() as s:  # a free local port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.start_processes(_allreduce_worker, args=(world, port, sizes, warmup, repeats, queue), nprocs=world,
                       join=True, start_method="spawn")
    return queue.get()


def _allreduce_worker(rank: int, world: int, port: int, sizes: list[int], warmup: int, repeats: int,
                      queue: Any) -> None:  # pragma: no cover - needs several GPUs
    torch = _torch()
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    be = Backend(torch, "cuda", warmup, repeats, flush_bytes=0.0, budget_bytes=0.0)
    results = []
    for size in sizes:
        buf = torch.ones(size // 2, dtype=torch.bfloat16, device="cuda")
        dist.barrier()
        times = be.time(lambda _i, buf=buf: dist.all_reduce(buf), 1)  # type: ignore[misc]  # mypy: lambda defaults
        # the slowest rank sets the collective's time
        t = torch.tensor(times, device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        results.append((size, _stats(t.tolist())))
    if rank == 0:
        queue.put(results)
    dist.destroy_process_group()


def plan(be: Backend, model: ModelSpec, tp: int, dtype: str, quick: bool, ops: tuple[str, ...],
         skipped: list[str] | None = None) -> list[Job]:
    """The jobs of one run, in order; attention shapes an optional kernel cannot run go to `skipped`."""
    skipped = [] if skipped is None else skipped
    torch = be.torch
    dt_ = getattr(torch, DTYPES[dtype])
    extra = {"model": model.name, "tp": tp}
    jobs: list[Job] = []
    if "peak" in ops:
        n = {("cpu", True): 512, ("cpu", False): 2048, ("cuda", True): 4096}.get((be.device, quick), 8192)
        jobs.append(_gemm_job(be, dt_, dtype, "peak", n, n, n, extra))
    if "memcpy" in ops:
        mib = (4, 32) if quick else ((4, 16, 64, 256) if be.device == "cpu" else (1, 4, 16, 64, 256, 1024))
        jobs += [_memcpy_job(be, m * 2**20, extra) for m in mib]
    if "gemm" in ops:
        tokens = QUICK_TOKENS if quick else FULL_TOKENS
        shapes = linear_shapes(model, tp)
        if quick:
            shapes = [s for s in shapes if s[0] != "lm_head"]
        jobs += [_gemm_job(be, dt_, dtype, name, m, k, n, extra) for name, k, n in shapes for m in tokens]
    if "attention" in ops and not model.is_mla:
        for kernel in _attention_backends(be):
            jobs += [_attention_job(be, dt_, dtype, model, tp, b, ctx, q, kernel, extra, skipped)
                     for b, ctx, q in attention_configs(quick)]
    if "allreduce" in ops:
        jobs += _allreduce_rows(be, quick, extra)
    return jobs


def _device_meta(be: Backend, dtype: str) -> dict[str, Any]:
    torch = be.torch
    meta: dict[str, Any] = {
        "backend": be.device, "dtype": dtype, "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda, "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": platform.node(), "python": platform.python_version(), "warmup": be.warmup,
        "repeats": be.repeats, "rotate_bytes": be.flush_bytes, "clocks": "left as they are (not locked)",
    }
    if be.device == "cuda":
        props = torch.cuda.get_device_properties(0)
        meta.update({"device_name": torch.cuda.get_device_name(0), "device_count": torch.cuda.device_count(),
                     "sm_count": props.multi_processor_count, "memory_bytes": props.total_memory,
                     "l2_bytes": getattr(props, "L2_cache_size", None), "driver_version": _driver_version(torch)})
        meta["profile"] = profile_name(meta["device_name"])
    else:
        meta.update({"device_name": _cpu_name(), "threads": torch.get_num_threads(), "cores": os.cpu_count(),
                     "cache_bytes": _cache_bytes_cpu(), "driver_version": None, "profile": "cpu",
                     "load_average_1min": os.getloadavg()[0] if hasattr(os, "getloadavg") else None})
    return meta


def _driver_version(torch: Any) -> str | None:
    try:
        v = torch._C._cuda_getDriverVersion()  # e.g. 12040 -> "12.4" (the CUDA driver API version)
        return f"{v // 1000}.{v % 1000 // 10}"
    except Exception:
        return None


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def run_bench(device: str, model: ModelSpec, tp: int = 1, dtype: str = "bf16", quick: bool = False,
              ops: tuple[str, ...] = OPS, progress: bool = True) -> BenchResult:
    """Run the sweep. Ctrl-C stops it and keeps what was measured (result.interrupted)."""
    if dtype not in DTYPES:
        raise SpecsimError(f"--dtype must be one of {', '.join(DTYPES)} for the bench, got {dtype!r}")
    if tp < 1:
        raise SpecsimError(f"--tp must be >= 1, got {tp}")
    bad = [o for o in ops if o not in OPS]
    if bad:
        raise SpecsimError(f"--ops: unknown {', '.join(bad)} (known: {', '.join(OPS)})")
    be = make_backend(device, quick)
    result = BenchResult(meta=_device_meta(be, dtype))
    result.meta.update({"model": model.name, "tp": tp, "quick": quick, "ops": list(ops)})
    device_col = result.meta["profile"]
    skipped: list[str] = []
    jobs = plan(be, model, tp, dtype, quick, ops, skipped)
    try:
        for _job, rows in _with_progress(jobs, progress):
            result.rows += [{"device": device_col, **r} for r in rows]
    except KeyboardInterrupt:
        result.interrupted = True
    result.meta["interrupted"] = result.interrupted
    result.meta["rows"] = len(result.rows)
    result.meta["skipped"] = skipped
    _summaries(result)
    return result


def _with_progress(jobs: list[Job], progress: bool) -> Iterator[tuple[Job, list[dict[str, Any]]]]:
    if not progress:
        for job in jobs:
            yield job, job.run()
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description:<40}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task("bench", total=len(jobs))
        for job in jobs:
            bar.update(task, description=job.label[:40])
            rows = job.run()
            bar.advance(task)
            yield job, rows


def _summaries(result: BenchResult) -> None:
    """Peak matmul rate and copy bandwidth into the metadata (what a base profile needs)."""
    df = pd.DataFrame(result.rows)
    if df.empty:
        return
    peak = df[(df["op"] == "gemm") & (df["layer_op"] == "peak")] if "layer_op" in df.columns else df.iloc[:0]
    if len(peak):
        r = peak.iloc[0]
        flops = 2 * r["tokens"] * r["d_in"] * r["d_out"]
        result.meta["peak_matmul_tflops"] = float(flops / (r["time_ms"] * 1e-3) / 1e12)
    copies = df[df["op"] == "memcpy"]
    if len(copies):
        result.meta["copy_bw_gb_per_s"] = float((copies["bytes"] / (copies["time_ms"] * 1e-3)).max() / 1e9)


def cpu_profile(meta: dict[str, Any], dtype: str) -> dict[str, Any]:
    """A base profile of this CPU from the run's own peak-matmul and copy measurements (so that
    `specsim calibrate` can start from it): datasheet fields = measured / 0.9."""
    peak = meta.get("peak_matmul_tflops")
    bw = meta.get("copy_bw_gb_per_s")
    if not peak or not bw:
        raise SpecsimError("a CPU base profile needs the peak and memcpy measurements (--ops with peak,memcpy)")
    tflops = round(peak / 0.9, 4)
    return {
        "name": "cpu", "description": f"{meta.get('device_name', 'cpu')} ({meta.get('threads')} threads), "
        f"from `specsim bench` on {meta.get('date', '')[:10]}",
        "sm_count": int(meta.get("threads") or 1), "clock_mhz": 0, "memory_gb": 1.0,
        "mem_bw_tb_per_s": round(bw / 0.9 / 1e3, 6), "l2_mb": round(float(meta.get("cache_bytes") or 2**25) / 1e6, 3),
        "peak_tflops": {"fp32": tflops, "tf32": None, "bf16": tflops, "fp16": tflops, "fp8": None, "int8": None},
        "interconnect": {"kind": "none", "link_bw_gb_per_s": 1, "allreduce_busbw_gb_per_s": 1,
                         "allreduce_latency_us": 1},
        "launch_overhead_us": 5, "measured": {"mem_bw_tb_per_s": bw / 1e3, "gemm_bf16_tflops": peak},
        "efficiency": {"gemm_compute": 0.9, "memory": 0.9, "kernel_overhead_us": 5.0,
                       "l2_bw_tb_per_s": round(bw / 1e3 * 4, 4),
                       "source": f"measured by `specsim bench` ({dtype}); peak and bandwidth = measured / 0.9"},
    }


def write_bench(result: BenchResult, output: str | Path, dtype: str) -> list[Path]:
    """The CSV, its sidecar JSON of metadata and, for a CPU run, a base profile YAML; each written
    atomically. Returns the paths written."""
    import yaml

    from specsim.calibration.fit import write_atomic
    from specsim.cost.measurements import COLUMNS

    output = Path(output)
    if not result.rows:
        raise SpecsimError("nothing was measured: no file written")
    df = pd.DataFrame(result.rows)
    cols = [c for c in COLUMNS if c in df.columns] + [c for c in df.columns if c not in COLUMNS]
    df = df[cols]
    files: list[tuple[Path, str]] = [(output, df.to_csv(index=False)),
                                     (output.with_suffix(".json"), json.dumps(result.meta, indent=2,
                                                                              default=_json_default) + "\n")]
    if result.meta.get("backend") == "cpu" and result.meta.get("peak_matmul_tflops") and result.meta.get(
            "copy_bw_gb_per_s"):
        files.append((output.with_suffix(".profile.yaml"), yaml.safe_dump(cpu_profile(result.meta, dtype),
                                                                          sort_keys=False)))
    for path, text in files:  # every text is built before the first file is written
        write_atomic(path, text)
    return [p for p, _ in files]


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    return str(o)

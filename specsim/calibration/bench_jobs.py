"""The bench's measurements as jobs: GEMMs of the model's linear layers (y = x @ W^T, as nn.Linear
runs them), decode and verification attention (PyTorch SDPA, and FlashAttention / FlashInfer when
installed on CUDA), memory copies (bytes = read + written), a large matmul for the peak rate, and
all-reduce (bench_allreduce.py). Each job rotates copies of its inputs (Backend.n_sets) so that no
repeat runs from cache."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specsim.calibration.bench_allreduce import allreduce_jobs
from specsim.calibration.bench_backend import Backend, BenchRow, Job, time_stats
from specsim.calibration.bench_shapes import DTYPES, FULL_TOKENS, QUICK_TOKENS, attention_configs, linear_shapes
from specsim.cost.model import ModelSpec
from specsim.errors import SpecsimError
from specsim.records import Json


def _gemm_job(be: Backend, dt_: Any, dtype: str, name: str, m: int, k: int, n: int, extra: dict[str, Json]) -> Job:
    def run() -> list[BenchRow]:
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
        return [{"op": "gemm", "dtype": dtype, "tokens": m, "d_in": k, "d_out": n, **time_stats(times),
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
                   kernel: str, extra: dict[str, Json], skipped: list[str]) -> Job:
    heads = max(round(model.n_heads / tp), 1)
    kvh = max(round(model.n_kv_heads / tp), 1)
    hd = model.head_dim

    def run() -> list[BenchRow]:
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
                 "n_heads": heads, "n_kv_heads": kvh, "head_dim": hd, **time_stats(times), "kernel": kernel,
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


def _memcpy_job(be: Backend, size: int, extra: dict[str, Json]) -> Job:
    def run() -> list[BenchRow]:
        torch = be.torch
        if 2 * size > be.budget_bytes:
            return []
        sets = be.n_sets(2 * size)
        src = [torch.empty(size, dtype=torch.uint8, device=be.device).fill_(1) for _ in range(sets)]
        dst = [torch.empty(size, dtype=torch.uint8, device=be.device) for _ in range(sets)]
        times = be.time(lambda i: dst[i].copy_(src[i]), sets)
        return [{"op": "memcpy", "bytes": 2 * size, **time_stats(times), "kernel": "copy_", "buffer_sets": sets,
                 **extra}]

    return Job(f"memcpy {size / 2**20:g} MiB", run)


def plan(be: Backend, model: ModelSpec, tp: int, dtype: str, quick: bool, ops: tuple[str, ...],
         skipped: list[str] | None = None) -> list[Job]:
    """The jobs of one run, in order; attention shapes an optional kernel cannot run go to `skipped`."""
    skipped = [] if skipped is None else skipped
    torch = be.torch
    dt_ = getattr(torch, DTYPES[dtype])
    extra: dict[str, Json] = {"model": model.name, "tp": tp}
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
        jobs += allreduce_jobs(be, quick, extra)
    return jobs

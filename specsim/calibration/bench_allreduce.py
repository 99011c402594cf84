"""The bench's all-reduce measurement: NCCL, one process per GPU, the slowest rank's time per size."""

from __future__ import annotations

import socket
from typing import Any

from specsim.calibration.bench_backend import Backend, BenchRow, Job, import_torch, time_stats
from specsim.records import Json


def allreduce_jobs(be: Backend, quick: bool, extra: dict[str, Json]) -> list[Job]:
    """NCCL all-reduce over 2, 4, 8 ... visible GPUs, one process per GPU (torch.multiprocessing)."""
    torch = be.torch
    if be.device != "cuda" or torch.cuda.device_count() < 2:
        return []
    sizes = [2**p for p in ((12, 20, 24) if quick else range(10, 29, 2))]
    worlds = [w for w in (2, 4, 8, 16) if w <= torch.cuda.device_count()]
    jobs = []
    for w in worlds:
        def run(w: int = w) -> list[BenchRow]:
            return [{"op": "allreduce", "dtype": "bf16", "bytes": s, "world_size": w, **st, "kernel": "nccl",
                     **extra} for s, st in _spawn_allreduce(w, sizes, be.warmup, be.repeats)]

        jobs.append(Job(f"all-reduce over {w} GPUs", run))
    return jobs


def _spawn_allreduce(world: int, sizes: list[int], warmup: int, repeats: int) -> list[tuple[int, dict[str, float]]]:
    import_torch()
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
    torch = import_torch()
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
        results.append((size, time_stats(t.tolist())))
    if rank == 0:
        queue.put(results)
    dist.destroy_process_group()

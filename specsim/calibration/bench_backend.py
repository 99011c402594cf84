"""Where the bench's kernels run and how they are timed (shared by the CUDA and CPU backends).

On CUDA, CUDA events around each call, after warm-up, with input buffers rotated through more bytes
than twice the L2 so that no repeat runs from cache, the median of the repeats, clocks left as they
are. On CPU, perf_counter around each call, the same rotation against the last-level cache.

PyTorch is an optional extra (`pip install ".[bench]"`): it is imported inside functions only.
"""

from __future__ import annotations

import math
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specsim.errors import SpecsimError, missing_extra
from specsim.records import Json

#: One measurement: a row of the bench's CSV (the measurement schema's columns its op has, cost/measurements.py)
BenchRow = dict[str, Json]


def import_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise missing_extra("bench", "torch", "specsim bench") from None
    return torch


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


@dataclass
class Job:
    """One measurement: its progress label, and what runs it (returning its rows)."""

    label: str
    run: Callable[[], list[BenchRow]]


def time_stats(times_s: list[float]) -> dict[str, float]:
    ms = [t * 1e3 for t in times_s]
    return {"time_ms": statistics.median(ms), "std_ms": statistics.pstdev(ms) if len(ms) > 1 else 0.0,
            "repeats": len(ms)}


def cpu_cache_bytes() -> float:
    """Largest CPU cache (bytes) from sysfs, else 32 MiB."""
    best = 0.0
    for p in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        m = re.match(r"(\d+)([KMG]?)", p.read_text().strip())
        if m:
            best = max(best, int(m.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[m.group(2)])
    return best or 32 * 2**20


def make_backend(device: str, quick: bool) -> Backend:
    torch = import_torch()
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
                   flush_bytes=2.0 * cpu_cache_bytes(), budget_bytes=(256 if quick else 1024) * 2**20)

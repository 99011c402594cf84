"""Prompt and output length distributions, each sampled from its own seeded stream (scenario/traffic.py).

- `Fixed`: every request the same length.
- `Uniform`: integers in [low, high], a benchmark client's random lengths with a range ratio
  (`range_ratio_lengths`, each client's own semantics).
- `Lognormal`: round(median x exp(sigma Z)), given as median and sigma, or as mean and cv
  (sigma^2 = ln(1 + cv^2), median = mean / sqrt(1 + cv^2)), clipped to [min, max].
- `Empirical`: resampled from observed values, e.g. a trace's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

from specsim.errors import SpecsimError
from specsim.scenario.traces import Trace

IntArray = npt.NDArray[np.int64]


def check_positive(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0 or not math.isfinite(value):
        raise SpecsimError(f"field '{name}' must be a number > 0, got {value!r}")


class LengthDist(Protocol):
    def sample(self, n: int, rng: np.random.Generator) -> IntArray: ...

    @property
    def mean_tokens(self) -> float: ...


@dataclass(frozen=True)
class Fixed:
    tokens: int

    def __post_init__(self) -> None:
        if isinstance(self.tokens, bool) or not isinstance(self.tokens, int | np.integer) or self.tokens < 1:
            raise SpecsimError(f"field 'tokens' must be an integer >= 1, got {self.tokens!r}")

    @property
    def mean_tokens(self) -> float:
        return float(self.tokens)

    def sample(self, n: int, rng: np.random.Generator) -> IntArray:
        return np.full(n, int(self.tokens), dtype=np.int64)


@dataclass(frozen=True)
class Uniform:
    """Integers uniform in [low, high] (both included)."""

    low: int
    high: int

    def __post_init__(self) -> None:
        for name in ("low", "high"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
                raise SpecsimError(f"field '{name}' must be an integer >= 1, got {v!r}")
        if self.high < self.low:
            raise SpecsimError(f"field 'high' ({self.high}) must be >= 'low' ({self.low})")

    @property
    def mean_tokens(self) -> float:
        return (self.low + self.high) / 2.0

    def sample(self, n: int, rng: np.random.Generator) -> IntArray:
        return rng.integers(int(self.low), int(self.high) + 1, n, dtype=np.int64)


#: How each benchmark client draws a random length L with range ratio r (`--random-range-ratio`):
#: - sglang (python/sglang/benchmark/datasets/common.py, compute_random_lens), ATOM (atom/benchmarks/
#:   benchmark_serving.py, from vLLM's pre-0.9 client) and vLLM before 0.9: randint(max(int(L * r), 1), L + 1),
#:   i.e. [r L, L] (so r = 0 draws from 1 token to L);
#: - vllm from 0.9 (vllm/benchmarks/datasets/random.py, RandomDataset): [floor(L (1 - r)), ceil(L (1 + r))],
#:   r in [0, 1) (the special tokens' count is taken from the prompt's L first).
RANGE_CLIENTS = ("sglang", "atom", "vllm")


def range_ratio_lengths(tokens: int, ratio: float, client: str = "sglang") -> LengthDist:
    """A client's random lengths around `tokens` with range ratio `ratio` (RANGE_CLIENTS); Fixed when they do
    not vary."""
    if isinstance(tokens, bool) or not isinstance(tokens, int | np.integer) or tokens < 1:
        raise SpecsimError(f"length must be an integer >= 1 token, got {tokens!r}")
    if client not in RANGE_CLIENTS:
        raise SpecsimError(f"--client must be one of {', '.join(RANGE_CLIENTS)}, got {client!r}")
    if not (0.0 <= ratio <= 1.0) or (client == "vllm" and ratio >= 1.0):
        bound = "[0, 1)" if client == "vllm" else "[0, 1]"
        raise SpecsimError(f"--range-ratio must be in {bound} for the {client} client, got {ratio:g}")
    if client == "vllm":
        low, high = max(1, math.floor(tokens * (1.0 - ratio))), math.ceil(tokens * (1.0 + ratio))
    else:
        low, high = max(int(tokens * ratio), 1), int(tokens)
    return Fixed(int(tokens)) if low == high else Uniform(int(low), int(high))


@dataclass(frozen=True)
class Lognormal:
    """round(median * exp(sigma * Z)), Z standard normal, clipped to [min_tokens, max_tokens]."""

    median: float
    sigma: float
    min_tokens: int = 1
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        check_positive("median", self.median)
        if isinstance(self.sigma, bool) or not isinstance(self.sigma, int | float) or not 0 <= self.sigma < 10:
            raise SpecsimError(f"field 'sigma' must be a number in [0, 10), got {self.sigma!r}")
        if self.min_tokens < 1 or (self.max_tokens is not None and self.max_tokens < self.min_tokens):
            raise SpecsimError(f"fields 'min'/'max' must satisfy 1 <= min <= max, got {self.min_tokens}, "
                               f"{self.max_tokens}")

    @classmethod
    def from_mean_cv(cls, mean: float, cv: float, min_tokens: int = 1, max_tokens: int | None = None) -> Lognormal:
        """The lognormal with this mean and coefficient of variation: sigma^2 = ln(1 + cv^2)."""
        check_positive("mean", mean)
        if isinstance(cv, bool) or not isinstance(cv, int | float) or cv < 0:
            raise SpecsimError(f"field 'cv' must be a number >= 0, got {cv!r}")
        return cls(mean / math.sqrt(1.0 + cv * cv), math.sqrt(math.log1p(cv * cv)), min_tokens, max_tokens)

    @property
    def mean_tokens(self) -> float:
        """Mean before rounding and clipping: median * exp(sigma^2 / 2)."""
        return self.median * math.exp(self.sigma**2 / 2.0)

    def sample(self, n: int, rng: np.random.Generator) -> IntArray:
        x = np.rint(self.median * np.exp(self.sigma * rng.standard_normal(n)))
        hi = np.inf if self.max_tokens is None else self.max_tokens
        return np.clip(x, self.min_tokens, hi).astype(np.int64)


@dataclass(frozen=True, eq=False)
class Empirical:
    """Resampled (with replacement) from observed lengths, e.g. a trace's."""

    values: IntArray
    source: str = ""

    def __post_init__(self) -> None:
        v = np.asarray(self.values)
        if v.size == 0 or (v < 1).any():
            raise SpecsimError(f"{self.source or 'empirical lengths'}: need at least one length, all >= 1")

    @classmethod
    def from_trace(cls, trace: Trace, field: Literal["prompt", "output"]) -> Empirical:
        values = trace.prompt_tokens if field == "prompt" else trace.output_tokens
        return cls(np.maximum(values, 1).astype(np.int64), f"{trace.source}:{field}")

    @property
    def mean_tokens(self) -> float:
        return float(np.mean(self.values))

    def sample(self, n: int, rng: np.random.Generator) -> IntArray:
        return np.asarray(self.values, dtype=np.int64)[rng.integers(0, len(self.values), n)]

"""A run's requests (arrival, prompt and output tokens; cached prefixes; sessions) and the seeded random streams
that make them (scenario/traffic.py generates them, simulate/engine.py serves them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from specsim.errors import SpecsimError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# Independent random streams (numpy SeedSequence spawn keys) per purpose, so that e.g. speculation on and
# off see identical arrivals and lengths whatever else consumes randomness.
STREAM_TRAFFIC = 0
STREAM_CLASSES = 1
STREAM_ACCEPTANCE = 2
STREAM_THINNING = 3
STREAM_TURNS = 4


def rng_for(seed: int, stream: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed), int(stream)]))


@dataclass(frozen=True, eq=False)
class Requests:
    """Requests sorted by arrival: arrival time (s), prompt and output lengths (tokens, >= 1)."""

    arrival_s: FloatArray
    prompt_tokens: IntArray
    output_tokens: IntArray
    concurrency: int | None = None  # closed loop: at most this many sent and unfinished (module docstring)
    #: prompt tokens already in the prefix cache when the request arrives (a warmed benchmark, a shared system
    #: prompt); None: none (simulate/sessions.py: the engine serves whole blocks of them, the last one recomputed)
    cached_tokens: IntArray | None = None
    #: multi-turn sessions (simulate/sessions.py): a session's requests are consecutive, each sent `think_s` after
    #: the previous one finishes (its prompt holds the context so far); -1: no session. None: no sessions
    session: IntArray | None = None
    think_s: FloatArray | None = None

    def __post_init__(self) -> None:
        if self.concurrency is not None and (isinstance(self.concurrency, bool) or self.concurrency < 1):
            raise SpecsimError(f"requests: concurrency must be an integer >= 1, got {self.concurrency!r}")
        a, p, o = self.arrival_s, self.prompt_tokens, self.output_tokens
        if not len(a) == len(p) == len(o):
            raise SpecsimError("requests: arrival, prompt and output arrays differ in length")
        if any(x is not None and len(x) != len(a) for x in (self.cached_tokens, self.session, self.think_s)):
            raise SpecsimError("requests: cached, session and think-time arrays must have one value per request")
        if (self.session is None) != (self.think_s is None):
            raise SpecsimError("requests: sessions need both the session ids and the think times")
        if self.cached_tokens is not None and len(a) and (np.min(self.cached_tokens) < 0
                                                          or (self.cached_tokens > p).any()):
            raise SpecsimError("requests: cached tokens must be between 0 and the prompt's tokens")
        if self.think_s is not None and len(a) and not (np.isfinite(self.think_s).all() and np.min(self.think_s) >= 0):
            raise SpecsimError("requests: think times must be finite and >= 0 s")
        if len(a) and (not np.isfinite(a).all() or (self.session is None and (np.diff(a) < 0).any())):
            raise SpecsimError("requests: arrival times must be finite and sorted")  # sessions: sent by the loop
        if len(a) and (np.min(p) < 1 or np.min(o) < 1):
            raise SpecsimError("requests: prompt and output lengths must be >= 1 token")

    @classmethod
    def at_once(cls, n: int, prompt_tokens: int, output_tokens: int, time_s: float = 0.0) -> Requests:
        """n identical requests all arriving at time_s (constant-concurrency checks)."""
        return cls(np.full(n, float(time_s)), np.full(n, prompt_tokens, dtype=np.int64),
                   np.full(n, output_tokens, dtype=np.int64))

    @property
    def n(self) -> int:
        return len(self.arrival_s)

    @property
    def mean_rate_rps(self) -> float:
        span = float(self.arrival_s[-1] - self.arrival_s[0]) if self.n > 1 else 0.0
        return (self.n - 1) / span if span > 0 else float("inf")

    def subset(self, keep: npt.NDArray[np.bool_]) -> Requests:
        """The kept requests (a session is kept or dropped whole: by its first request)."""
        if self.session is not None:
            first = np.concatenate([[True], (self.session[1:] != self.session[:-1]) | (self.session[1:] < 0)])
            keep = np.asarray(keep)[np.maximum.accumulate(np.where(first, np.arange(self.n), 0))]

        def cut(x: npt.NDArray[np.generic] | None) -> npt.NDArray[np.generic] | None:
            return None if x is None else x[keep]

        return Requests(self.arrival_s[keep], self.prompt_tokens[keep], self.output_tokens[keep], self.concurrency,
                        cut(self.cached_tokens), cut(self.session), cut(self.think_s))  # type: ignore[arg-type]

    def thin(self, keep_fraction: float, seed: int = 0) -> Requests:
        """Random thinning: each request kept with probability keep_fraction (thinned Poisson stays Poisson,
        at rate x keep_fraction). One uniform per request from `seed`, so smaller fractions keep nested
        subsets (the requests one of 4 replicas sees are among those one of 2 replicas sees)."""
        if not 0 < keep_fraction <= 1:
            raise SpecsimError(f"thinning: keep_fraction must be in (0, 1], got {keep_fraction}")
        return self.subset(rng_for(seed, STREAM_THINNING).random(self.n) < keep_fraction)

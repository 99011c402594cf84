"""A run's result (see `engine.simulate`): the step log as arrays, the emitted-token histogram, per-request times,
and a sessions run's slots put back in request order."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt

from specsim.scenario.serving import EngineConfig
from specsim.scenario.traffic import Requests
from specsim.simulate.state import LogRow, Loop

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, eq=False)
class StepLog:
    """One row per iteration. `running` and `waiting` are counted after scheduling, at the step's start;
    `arrival_area_s` is the request-seconds spent waiting by requests that arrived during the step."""

    start_s: FloatArray
    duration_s: FloatArray
    decode_batch: IntArray
    running: IntArray
    waiting: IntArray
    k: IntArray
    prefill_tokens: IntArray
    tokens: IntArray
    kv_tokens: IntArray  # held at the step's end
    arrival_area_s: FloatArray
    emitted: IntArray  # (steps, max_k + 2): decoding requests that emitted e tokens in the step, column e

    @property
    def n(self) -> int:
        return len(self.start_s)


@dataclass(frozen=True, eq=False)
class SimResult:
    """Per-request times (NaN for rejected requests), the step log and what the run was given."""

    requests: Requests
    engine: EngineConfig
    seed: int
    workload: IntArray  # workload class of each request
    scheduled_s: FloatArray  # first scheduled (end of queueing)
    first_token_s: FloatArray
    finish_s: FloatArray
    preemptions: IntArray
    rejected: BoolArray
    steps: StepLog
    resume_gaps_s: FloatArray  # token gaps across a preemption (recompute)
    hit_tokens: IntArray | None = None  # prompt tokens each request found in the prefix cache (None: not modelled)
    reload_s: float = 0.0  # seconds spent reloading cached prefixes from the host tier

    @property
    def completed(self) -> BoolArray:
        return np.asarray(~self.rejected)


def _log_array(log: list[LogRow], blocks: list[tuple[int, FloatArray]]) -> FloatArray:
    """The step log as one (steps, 10) array: the rows logged one by one, with the fast path's blocks placed where
    they were logged (each after the rows logged before it)."""
    rows = np.fromiter(chain.from_iterable(log), np.float64, count=10 * len(log)).reshape(-1, 10)
    if not blocks:
        return rows
    parts: list[FloatArray] = []
    at = 0
    for pos, block in blocks:
        parts += [rows[at:pos], block]
        at = pos
    parts.append(rows[at:])
    return np.concatenate(parts)


def _histogram(lp: Loop, steps_n: int, width: int) -> IntArray:
    """(steps, width): decoding requests that emitted e tokens in each step, column e."""
    hist = np.zeros((steps_n, width), dtype=np.int64)
    if lp.spec_steps or lp.spec_blocks:
        idx = [np.repeat(np.asarray(lp.spec_steps, dtype=np.int64), [len(x) for x in lp.spec_counts])]
        idx += [np.repeat(np.arange(first, first + len(b), dtype=np.int64), b.shape[1]) for first, b in lp.spec_blocks]
        counts = [*lp.spec_counts, *(b.ravel() for _, b in lp.spec_blocks)]
        hist += np.bincount(np.concatenate(idx) * width + np.concatenate(counts),
                            minlength=steps_n * width).reshape(steps_n, width)
    if lp.plain_steps:
        at, batch = np.asarray(lp.plain_steps, dtype=np.int64).reshape(-1, 2).T
        hist[at, 1] = batch
    for first, m, batch_size in lp.plain_blocks:
        hist[first:first + m, 1] = batch_size
    return hist


def result_of(lp: Loop, requests: Requests, engine: EngineConfig, seed: int) -> SimResult:
    """The run's result from its state: the step log as arrays, the emitted-token histogram, per-request times (the
    send times of a closed loop: TTFT and e2e count from them)."""
    cols = _log_array(lp.log, lp.blocks)
    hist = _histogram(lp, len(cols), engine.policy.max_k + 2)
    steps = StepLog(cols[:, 0], cols[:, 1], cols[:, 2].astype(np.int64), cols[:, 3].astype(np.int64),
                    cols[:, 4].astype(np.int64), cols[:, 5].astype(np.int64), cols[:, 6].astype(np.int64),
                    cols[:, 7].astype(np.int64), cols[:, 8].astype(np.int64), cols[:, 9], hist)
    if lp.clients is not None:
        requests = Requests(np.asarray(lp.arrivals), requests.prompt_tokens, requests.output_tokens,
                            requests.concurrency, requests.cached_tokens)
    rejected = np.asarray(lp.rejected if lp.rejected is not None else np.zeros(requests.n, dtype=bool), dtype=bool)
    per: list[npt.NDArray[Any]] = [lp.workload, np.asarray(lp.sched_s), np.asarray(lp.first_s), lp.finish,
                                   np.asarray(lp.preempt, dtype=np.int64), rejected]
    hits = None if lp.hit_of is None else np.asarray(lp.hit_of, dtype=np.int64)
    if lp.sessions is not None:  # slots back to requests; turns never sent (their session ended) are rejected
        requests, per, hits = _by_request(lp, requests, [*per, hits])
    workload, sched, first, finish, preempt, rejected = per
    return SimResult(requests, engine, seed, workload, sched, first, finish, preempt, rejected.astype(bool), steps,
                     np.asarray(lp.resume_gaps, dtype=np.float64), hits,
                     lp.cache.reload_s if lp.cache is not None else 0.0)


def _by_request(lp: Loop, requests: Requests, per: list[npt.NDArray[Any] | None]
                ) -> tuple[Requests, list[npt.NDArray[Any]], IntArray]:
    """A sessions run's per-slot results in request order: send times, workload, scheduled, first token, finish,
    preemptions, rejected (also every turn never sent), hit tokens."""
    assert lp.sessions is not None
    n = requests.n
    order = np.asarray(lp.sessions.request_of, dtype=np.int64)
    sent = len(order)
    out: list[npt.NDArray[Any]] = []
    for x, fill in zip(per, [0, np.nan, np.nan, np.nan, 0, True, 0], strict=True):
        assert x is not None
        y = np.full(n, fill, dtype=x.dtype)
        y[order] = x[:sent]
        out.append(y)
    arrival = np.full(n, np.nan)
    arrival[order] = np.asarray(lp.arrivals[:sent])
    arrival[np.isnan(arrival)] = np.nanmax(arrival) if sent else 0.0
    sent_requests = Requests(arrival, requests.prompt_tokens, requests.output_tokens, requests.concurrency,
                             requests.cached_tokens, requests.session, requests.think_s)
    return sent_requests, out[:-1], np.asarray(out[-1], dtype=np.int64)

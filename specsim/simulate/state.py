"""The event loop's state (see `engine.simulate`): what every part of one run reads and updates in place, and the
closed-loop clients that release requests as others finish.

`Loop` holds the lists and arrays a run mutates (the waiting queue, partial prefills, per-request times, the step
log) and the run's fixed inputs (limits, the step table's rows); the loop's scalars (time, KV held, the next
arrival) and the running requests' arrays (`Running`) travel as arguments and return values, so the hot loop
keeps them in locals.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from specsim.simulate.cost import StepTable
from specsim.simulate.sessions import PrefixCache, Sessions

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
#: The running requests: ids, contexts, remaining outputs (one each) and survival by depth (rows) of each (columns).
Running = tuple[IntArray, IntArray, IntArray, FloatArray]
#: One logged step: start, duration, decode batch, running, waiting, k, prefill tokens, tokens, KV held, arrival
#: area (`engine.StepLog`'s columns in order).
LogRow = tuple[float, float, int, int, int, int, int, int, int, float]
INF = float("inf")


class Clients:
    """Closed-loop clients (engine module docstring): request j waits, at +inf in the loop's arrival list, until a
    finish sends it at max(its arrival, then); the prefix sums of admitted arrivals the loop reads grow as they
    are sent."""

    def __init__(self, arrivals: list[float], arr_list: list[float], cum_n: list[float], cum_t: list[float],
                 rejected: list[bool], sent: int) -> None:
        self.arrivals, self.arr_list, self.cum_n, self.cum_t, self.rejected = arrivals, arr_list, cum_n, cum_t, rejected
        self.sent = sent

    @classmethod
    def start(cls, concurrency: int | None, arr_list: list[float], cum_n: list[float], cum_t: list[float],
              rejected: list[bool]) -> Clients | None:
        """The clients of a closed-loop run (None: open loop); the first `concurrency` requests are sent, the rest
        wait (arr_list and the prefix sums are cut to the sent ones, in place)."""
        n = len(arr_list)
        if concurrency is None or concurrency >= n:
            return None
        arrivals = arr_list[:]
        del cum_n[concurrency + 1:], cum_t[concurrency + 1:]
        arr_list[concurrency:] = [INF] * (n - concurrency)
        out = cls(arrivals, arr_list, cum_n, cum_t, rejected, concurrency)
        out.send(sum(rejected[:concurrency]), 0.0)  # a rejected request frees its client at once
        return out

    def send(self, count: int, t: float) -> None:
        """`count` clients are free at t: each sends the next request (a rejected one frees it again at once)."""
        n = len(self.arrivals)
        while count > 0 and self.sent < n:
            j = self.sent
            a = max(self.arrivals[j], t)
            self.arr_list[j] = a
            ok = not self.rejected[j]
            self.cum_n.append(self.cum_n[-1] + ok)
            self.cum_t.append(self.cum_t[-1] + (a if ok else 0.0))
            self.sent = j + 1
            count -= ok


@dataclass(frozen=True, eq=False, slots=True)
class Loop:
    """One run's inputs and the containers it updates in place (module docstring)."""

    arrivals: list[float]  # send times of a closed loop (+inf until sent)
    cum_n: list[float]  # admitted arrivals among the first i (prefix sums, for the waiting area)
    cum_t: list[float]  # and their arrival times
    rejected: list[bool] | None  # None: nothing rejected
    waiting: deque[int]
    prompt: list[int]
    out: list[int]
    gen: list[int]  # tokens generated before the current (re)prefill
    cap: int  # KV capacity, tokens
    budget_max: int  # max_num_batched_tokens
    max_seqs: int
    dec_rows: list[list[float]]  # decode seconds over the context grid, one row per batch (at its k)
    grid: list[float]
    table: StepTable
    k_of_b: list[int]
    w_of_b: list[int]  # tokens one decoding sequence takes of the budget and KV at each batch (k + 1 for a chain)
    surv_t: FloatArray  # (depth, classes): survival by depth of each workload class
    workload: IntArray
    urng: np.random.Generator  # acceptance draws
    prefill_time: Callable[[float, float], float]
    clients: Clients | None
    finish: FloatArray
    sched_s: list[float]
    first_s: list[float]
    preempt: list[int]
    last_emit: dict[int, float]  # a preempted request's last emission (its gap across the recompute)
    resume_gaps: list[float]
    pre: list[list[int]]  # partial prefills: [request, tokens prefilled, tokens to prefill]
    log: list[LogRow]
    #: steps logged as arrays (a stretch's quiet prefix): (rows of `log` before them, (steps, 10) array); `logged`
    #: [0] counts their steps, so a step's index is len(log) + logged[0]
    blocks: list[tuple[int, FloatArray]]
    logged: list[int]
    # emitted-token histogram, counted once at the end: per speculative step its index and its draws' counts
    # (1 + accepted, capped), per plain step its index and its decode batch (each emits 1 token)
    spec_steps: list[int]
    spec_counts: list[IntArray]
    plain_steps: list[tuple[int, int]]
    spec_blocks: list[tuple[int, IntArray]]  # steady stretches: first step, counts (steps, decode batch)
    plain_blocks: list[tuple[int, int, int]]  # steady stretches without speculation: first step, steps, batch
    # cached prefixes and sessions (sessions.py); None: not modelled (nothing cached, no sessions)
    cache: PrefixCache | None = None
    cached: list[int] | None = None  # each slot's own cached prompt tokens (`Requests.cached_tokens`)
    session_of: list[int] | None = None  # each slot's session (-1: none)
    sessions: Sessions | None = None
    hit_of: list[int] | None = None  # the tokens each slot's (last) admission found cached


def place_sends(lp: Loop, due: list[tuple[float, int]]) -> None:
    """Sessions' sends that are due take the next slots (sessions.py): the slot's send time, lengths, cached tokens,
    session and workload class; a turn that could never fit the KV cache is rejected and ends its session."""
    sess = lp.sessions
    assert sess is not None and lp.rejected is not None and lp.cached is not None and lp.session_of is not None
    s = len(sess.request_of) - len(due)
    for a, r in due:
        lp.arrivals[s] = a
        lp.prompt[s], lp.out[s] = sess.prompt[r], sess.output[r]
        lp.cached[s], lp.session_of[s] = sess.cached[r], sess.session[r]
        lp.workload[s] = sess.workload[r]
        rej = sess.prompt[r] + sess.output[r] > sess.kv_limit
        lp.rejected[s] = rej
        lp.cum_n.append(lp.cum_n[-1] + (not rej))
        lp.cum_t.append(lp.cum_t[-1] + (0.0 if rej else a))
        if rej:
            sess.end(a)
        s += 1


def finished(lp: Loop, slots: list[int], t: float) -> None:
    """Requests finished at t: their sessions' contexts are cached, their next turns sent (sessions.py)."""
    if lp.cache is not None and lp.session_of is not None:
        for s in slots:
            g = lp.session_of[s]
            if g >= 0:
                lp.cache.put(g, lp.prompt[s] + lp.out[s])
    if lp.sessions is not None:
        lp.sessions.finished([lp.sessions.request_of[s] for s in slots], t)

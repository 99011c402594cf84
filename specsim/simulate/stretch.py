"""Steady stretches: the event loop's fast path (see `engine.simulate`).

A steady stretch is decoding only: no partial prefill, nothing admitted, no preemption. It ends at the first
finish, at an arrival that is admitted or at a preemption. Its steps advance several at once: the stretch's
accepted tokens are compared in one array from the same uniform draws, in the same order, and each step is
priced at its own mean context, so the result is identical to stepping one iteration at a time.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque

import numpy as np
import numpy.typing as npt

from specsim.simulate.cost import interpolate_row
from specsim.simulate.state import Loop, Running

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


def stretch(lim: int, t: float, dt: float, na: int, nd: int, k: int, dec_kv: int, pre_kv: int, upos: int,
            ubuf: FloatArray, run: Running, lp: Loop) -> tuple[float, int, int, int, Running]:
    """Up to `lim` steps of a steady stretch from a step already scheduled (nd decoding requests, nothing
    prefilling or admitted, priced at dt): each step exactly as `simulate`'s loop runs it, the accepted tokens of
    all `lim` steps compared at once from the same draws (step i reads the buffer at upos + i * nd, as the loop
    does). Stops after the first step in which a request finishes, or before a step that would preempt or admit.
    Returns t, the next arrival, the decode KV, the buffer position and the running arrays after the stretch."""
    first = len(lp.log) + lp.logged[0]
    if k:
        e, csum, f = _emissions(lim, nd, k, ubuf[upos:upos + lim * nd], run)
        toks: list[int] = e.sum(axis=1).tolist()
        t, na, dec_kv, m, run = _steps(lim, f, toks, csum, t, dt, na, nd, k, dec_kv, pre_kv, run, lp)
        lp.spec_blocks.append((first, e[:m]))
        return t, na, dec_kv, upos + m * nd, run
    f = lim - 1 if int(np.min(run[2])) == lim else lim  # every decode emits one token a step
    t, na, dec_kv, m, run = _steps(lim, f, [nd] * lim, None, t, dt, na, nd, k, dec_kv, pre_kv, run, lp)
    lp.plain_blocks.append((first, m, nd))
    return t, na, dec_kv, upos, run


def _emissions(lim: int, nd: int, k: int, u: FloatArray, run: Running) -> tuple[IntArray, IntArray, int]:
    """The tokens each decode emits in each of `lim` speculative steps (lim, nd), their running sums over the steps
    and f, the first step in which a request finishes (lim: none), from the draws `u` (step i's at i * nd)."""
    run_rem, run_s = run[2], run[3]
    # accepted tokens of each step: A = #{i <= k : u < S_i}; each decode emits 1 + A (capped at a finish)
    e = (u.reshape(lim, 1, nd) < run_s[:k]).sum(axis=1)
    e += 1
    csum = np.cumsum(e, axis=0)
    hit: BoolArray = np.asarray((csum >= run_rem).any(axis=1))  # cumulative: from the first finish on
    f = int(np.argmax(hit)) if hit[-1] else lim
    if f < lim:  # the finishing step: emissions capped by what is left
        before = csum[f - 1] if f else 0
        np.minimum(e[f], run_rem - before, out=e[f])
        csum[f] = e[f] + before
    return e, csum, f


def _steps(lim: int, f: int, toks: list[int], csum: IntArray | None, t: float, dt: float, na: int, nd: int, k: int,
           dec_kv: int, pre_kv: int, run: Running, lp: Loop) -> tuple[float, int, int, int, Running]:
    """The stretch's steps, each logged as the loop logs it (step m emits toks[m] tokens, csum[m] by each decode
    so far; csum None: one a step), until step f (a finish), `lim` steps, or before a step that would preempt or
    admit. Returns t, the next arrival, the decode KV, the steps run and the running arrays after them."""
    arr, cum_n, cum_t, log, waiting = lp.arrivals, lp.cum_n, lp.cum_t, lp.log, lp.waiting
    n = len(arr)
    kv_step = nd * lp.w_of_b[nd]  # k + 1 for a chain
    budget = lp.budget_max - kv_step
    can_admit = budget > 0 and nd < lp.max_seqs
    row, grid = lp.dec_rows[nd], lp.grid
    last = len(grid) - 2
    m = 0
    if min(f, lim) >= VECTOR_STEPS:  # the steps before any arrival, break or finish, as arrays
        t, dt, dec_kv, m = _quiet_steps(min(f, lim), toks, t, dt, na, nd, k, dec_kv, pre_kv, budget, can_admit, lp)
        if m == lim or dt != dt:  # every step done, or the next one stops the stretch (dt NaN marks it)
            done = csum[m - 1] if csum is not None else m
            return t, na, dec_kv, m, (run[0], run[1] + done, run[2] - done, run[3])
    while True:
        t_end = t + dt
        if na < n and arr[na] <= t_end:
            j = bisect_right(arr, t_end, na)
            area = (cum_n[j] - cum_n[na]) * t_end - (cum_t[j] - cum_t[na])
        else:
            area = 0.0
        tok = toks[m]
        dec_kv += tok
        if m == f:  # some request emitted its last token
            dec_kv, run = _finish(csum[f] if csum is not None else f + 1, t_end, dec_kv, run, lp.finish)
        log.append((t, dt, nd, nd, len(waiting), k, 0, tok, dec_kv + pre_kv, area))
        t = t_end
        m += 1
        if m > f or m == lim:
            break
        # the next step's start, as the loop runs it: arrivals join the queue; stop where it would preempt or admit
        if na < n and arr[na] <= t:
            na = join_arrivals(arr, na, t, waiting, lp.rejected)
        free = lp.cap - dec_kv - pre_kv - kv_step
        if free < 0 or (waiting and can_admit and head_need(lp, waiting[0], budget, free) <= free):
            break
        x = dec_kv / nd
        j = bisect_right(grid, x) - 1  # interpolate_row inline
        j = 0 if j < 0 else last if j > last else j
        lo = row[j]
        dt = lo + (x - grid[j]) / (grid[j + 1] - grid[j]) * (row[j + 1] - lo)
        if dt != dt:  # NaN: a block not evaluated yet
            lp.table.refresh_rows(lp.dec_rows, lp.k_of_b, nd, x)
            row = lp.dec_rows[nd]
            dt = interpolate_row(row, grid, x)
    if m <= f:  # stopped before the finishing step: every decode advances by its tokens so far
        done = csum[m - 1] if csum is not None else m
        run = (run[0], run[1] + done, run[2] - done, run[3])
    return t, na, dec_kv, m, run


#: A stretch's quiet prefix (below) runs as arrays from this many steps on; shorter ones step one by one.
VECTOR_STEPS = 32


def _quiet_steps(upto: int, toks: list[int], t: float, dt: float, na: int, nd: int, k: int, dec_kv: int,
                 pre_kv: int, budget: int, can_admit: bool, lp: Loop) -> tuple[float, float, int, int]:
    """The stretch's first steps, before `upto` (its first finish, or its end), before the first step that ends at
    or after the next arrival, and before the first step start at which `_steps` would stop (a preemption or an
    admission): each logged exactly as `_steps` logs it (the same float operations in the same order: times are
    running sums, each step priced at its own mean context by the same interpolation). Returns t, dt (of the
    next step; NaN: the next step stops the stretch), the decode KV and the steps done."""
    tok = np.asarray(toks[:upto], dtype=np.int64)
    kv = dec_kv + np.cumsum(tok)  # decode KV after each step
    grid = np.asarray(lp.grid)
    row = np.asarray(lp.dec_rows[nd])
    x = kv / nd  # the next step's mean context
    j = np.clip(np.searchsorted(grid, x, side="right") - 1, 0, len(grid) - 2)
    lo = row[j]
    nxt = lo + (x - grid[j]) / (grid[j + 1] - grid[j]) * (row[j + 1] - lo)
    dts = np.concatenate([[dt], nxt[:-1]])
    ends = np.cumsum(np.concatenate([[t], dts]))[1:]  # sequential sums, as t += dt
    free = lp.cap - kv - pre_kv - nd * lp.w_of_b[nd]  # at the start of the next step
    stop = free < 0
    waiting = lp.waiting
    if waiting and can_admit:
        if lp.cache is not None:  # the head's cached prefix depends on the KV held: left to `_steps`
            return t, dt, dec_kv, 0
        stop |= min(lp.prompt[waiting[0]] + lp.gen[waiting[0]], budget) <= free
    stop |= np.isnan(nxt)  # a block of the table not evaluated yet: left to the step-by-step path
    hit = np.flatnonzero(stop)
    m = int(hit[0]) + 1 if hit.size else upto  # the times of these steps are finite
    if na < len(lp.arrivals) and lp.arrivals[na] <= ends[m - 1]:  # no step may end at or after an arrival
        m = int(np.searchsorted(ends[:m], lp.arrivals[na], side="left"))
    hit = hit[hit < m]
    m = int(hit[0]) + 1 if hit.size else m
    if m == 0:
        return t, dt, dec_kv, 0
    block = np.zeros((m, 10))
    block[0, 0] = t
    block[1:, 0] = ends[:m - 1]
    block[:, 1] = dts[:m]
    block[:, 2:6] = (nd, nd, len(waiting), k)
    block[:, 7] = tok[:m]
    block[:, 8] = kv[:m] + pre_kv
    lp.blocks.append((len(lp.log), block))
    lp.logged[0] += m
    t_next = float(ends[m - 1])
    kv_next = int(kv[m - 1])
    if hit.size and int(hit[0]) + 1 == m:  # the step after this prefix would stop the stretch
        return t_next, float("nan"), kv_next, m
    return t_next, float(nxt[m - 1]), kv_next, m


def _finish(done: IntArray | int, t_end: float, dec_kv: int, run: Running, finish: FloatArray) -> tuple[int, Running]:
    """The step in which some request emitted its last token: every decode advances by `done` (its tokens in the
    stretch), the finished leave at t_end and free their KV. Returns the decode KV and the running arrays."""
    run_id, run_ctx, run_rem, run_s = run
    run_ctx, run_rem = run_ctx + done, run_rem - done
    fin = run_rem == 0
    finish[run_id[fin]] = t_end
    dec_kv -= int(run_ctx[fin].sum())
    keep = ~fin
    return dec_kv, (run_id[keep], run_ctx[keep], run_rem[keep], run_s[:, keep])


def join_arrivals(arr: list[float], na: int, t: float, waiting: deque[int], rejected: list[bool] | None) -> int:
    """Requests that arrived by t join the queue (rejected ones do not); returns the next arrival."""
    j = bisect_right(arr, t, na)
    waiting.extend([i for i in range(na, j) if not rejected[i]] if rejected is not None else range(na, j))
    return j


def head_hit(lp: Loop, rid: int, held: int) -> int:
    """The cached tokens request `rid` would prefill from if admitted now, with `held` KV tokens in use: its own
    cached tokens or its session's cached context, whichever serves more (sessions.py)."""
    cache = lp.cache
    assert cache is not None and lp.cached is not None and lp.hit_of is not None
    target = lp.prompt[rid] + lp.gen[rid]
    own = cache.usable(lp.cached[rid], target) if lp.cached[rid] else 0
    session = lp.session_of[rid] if lp.session_of is not None else -1
    return max(own, cache.peek(session, held, target))


def head_need(lp: Loop, rid: int, budget: int, free: int) -> int:
    """The KV tokens admitting request `rid` would take now: its first chunk, plus its cached prefix."""
    target = lp.prompt[rid] + lp.gen[rid]
    if lp.cache is None:
        return min(target, budget)
    h = head_hit(lp, rid, lp.cap - free)
    return h + min(target - h, budget)

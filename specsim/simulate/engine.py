"""The event loop: iteration-level simulation of a continuous-batching engine (vLLM / SGLang style).

Each iteration follows vLLM's V1 scheduler (vllm/v1/core/sched/scheduler.py, `schedule`):
1. Running requests are served first, oldest first. Every decoding request takes 1 + k tokens of the
   token budget (max_num_batched_tokens) and KV slots for them (k lookahead slots for the draft; a draft
   tree takes 1 + its nodes, `EngineConfig.verify_tokens`).
   When the KV cache cannot hold them, the newest running request is preempted by recompute: its KV
   blocks are freed, it goes back to the front of the waiting queue, and when scheduled again it
   prefills its prompt plus the tokens it had already generated (vLLM's PreemptionMode.RECOMPUTE).
2. Partially prefilled requests continue (chunked prefill), then waiting requests are admitted in
   arrival order while the budget lasts, fewer than max_num_seqs requests run and the KV cache holds
   the chunk; the first that does not fit stops admission (first come, first served).
3. The iteration costs decode_s(batch, mean context, k) + prefill_s(chunk tokens, context), read from a
   `StepTable` (see cost.py for the mixed-step simplification).
4. Each decoding request emits 1 + A tokens, A drawn from its workload class's acceptance (a chain's, or
   a tree's accepted depth as survival by depth) and capped by its remaining output; a request whose
   prefill completes emits its first token (TTFT).

k comes from the speculation policy at the step's decode batch, reduced where needed so that
batch x (k + 1) fits the token budget (vLLM truncates speculative tokens that do not fit). KV is counted
in tokens (vLLM's 16-token blocks waste < 16 tokens per sequence; pass a capacity net of that).
Requests that could never fit the KV cache alone (prompt + output + k + 1 > capacity) are rejected.

The loop (`_run`) keeps its scalars in locals and calls out for the parts that run less often than
every iteration: preemption (`_preempt`), admission (`_admit`), emission (`_decode`, `_complete`)
and the steady stretches (stretch.py).

Closed loop (`Requests.concurrency` N, scenario/traffic.py): the first N requests are sent at their arrival;
each finish (or rejection) sends the next request at max(its arrival, that moment), as a benchmark client's
semaphore of N does. The result's `requests.arrival_s` are the send times, so TTFT and e2e count from the
send, as the clients measure them.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque

import numpy as np
import numpy.typing as npt

from specsim.errors import SpecsimError
from specsim.scenario.serving import EngineConfig
from specsim.scenario.traffic import STREAM_ACCEPTANCE, STREAM_CLASSES, Requests, rng_for
from specsim.scenario.workload import AcceptanceMix
from specsim.simulate.cost import StepCost, StepTable, interpolate_row, rows_of
from specsim.simulate.result import SimResult, result_of

__all__ = ["SimResult", "simulate"]
from specsim.simulate.sessions import PrefixCache, Sessions
from specsim.simulate.state import INF, Clients, Loop, Running, finished, place_sends
from specsim.simulate.stretch import head_hit, join_arrivals
from specsim.simulate.stretch import stretch as _stretch  # `simulate` calls the fast path by this name

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


def _table_for(cost: StepCost, engine: EngineConfig, k_of_b: list[int], max_context: float) -> StepTable:
    rows = rows_of([k_of_b])
    if isinstance(cost, StepTable):
        if not cost.covers_rows(rows):
            raise SpecsimError(f"step table covers batch <= {cost.max_batch}, k in {list(cost.ks)} (rows evaluated: "
                               f"{int(cost.filled.sum())}); the run needs batch <= {engine.max_num_seqs}, k in "
                               f"{sorted(rows)}")
        return cost
    return StepTable.build(cost, engine.max_num_seqs, rows, max_context, engine.max_num_batched_tokens, rows=rows)


#: Steady stretches (see `simulate`): at most this many steps are drawn ahead at once, and a stretch shorter than
#: MIN_STRETCH steps is left to the step-by-step path.
STRETCH_MAX = 1024
MIN_STRETCH = 3
#: Acceptance draws taken from the seed's stream at once (a refill discards what is left of the buffer).
DRAWS = 1 << 16
_NO_CHUNKS: tuple[list[tuple[list[int], int]], int, float, int, float] = ([], 0, 0.0, 0, 0.0)


def simulate(requests: Requests, engine: EngineConfig, cost: StepCost, acceptance: AcceptanceMix | None = None,
             seed: int = 0, *, fast: bool = True) -> SimResult:
    """Run the engine over the requests until every admitted request finishes; deterministic for a seed.

    Steady stretches (decoding only: no partial prefill, nothing admitted, no preemption; they end at the first
    finish, at an arrival that is admitted or at a preemption) advance several steps at once: the stretch's
    accepted tokens are compared in one array from the same uniform draws, in the same order, and each step is
    priced at its own mean context, so the result is identical to stepping one iteration at a time
    (``fast=False``, kept for tests)."""
    lp = _start(requests, engine, cost, acceptance, seed)
    _run(lp, fast)
    return result_of(lp, requests, engine, seed)


def _start(requests: Requests, engine: EngineConfig, cost: StepCost, acceptance: AcceptanceMix | None,
           seed: int) -> Loop:
    """The run's state before its first step: the step table's rows, each request's workload class, the rejected
    requests (prompt + output + one step's tokens beyond the KV cache), the clients of a closed loop."""
    n = requests.n
    policy = engine.policy
    kmax = policy.max_k
    if kmax > 0 and acceptance is None:
        raise SpecsimError(f"speculation policy {policy.label} needs an acceptance mix (workload classes)")
    mix = acceptance if acceptance is not None else AcceptanceMix.constant(0.0)
    k_of_b: list[int] = engine.k_by_batch().tolist()
    prompt_a, out_a = requests.prompt_tokens, requests.output_tokens
    longest = float(np.max(prompt_a + out_a)) if n else 1.0
    table = _table_for(cost, engine, k_of_b, longest + engine.max_verify_tokens)
    rejected = prompt_a + out_a + engine.max_verify_tokens > engine.kv_capacity_tokens
    arr_list: list[float] = requests.arrival_s.tolist()
    admitted = (~rejected).astype(np.float64)
    cum_n: list[float] = np.concatenate([[0.0], np.cumsum(admitted)]).tolist()
    cum_t: list[float] = np.concatenate([[0.0], np.cumsum(requests.arrival_s * admitted)]).tolist()
    rej_list: list[bool] = rejected.tolist()
    workload = mix.assign(n, rng_for(seed, STREAM_CLASSES))
    cache = None
    if requests.cached_tokens is not None or requests.session is not None:
        cache = PrefixCache(engine.kv_capacity_tokens, engine.kv_block_tokens, engine.cache_drop_blocks,
                            engine.host_kv_tokens, engine.host_reload_s_per_token)
    sessions = None
    if requests.session is not None and requests.think_s is not None:
        sessions = Sessions.start(requests, workload, engine.kv_capacity_tokens - engine.max_verify_tokens)
        arr_list, cum_n, cum_t, rej_list = [INF] * n, [0.0], [0.0], [False] * n
        workload = np.zeros(n, dtype=np.int64)
    clients = None if sessions is not None else Clients.start(requests.concurrency, arr_list, cum_n, cum_t, rej_list)
    nan = float("nan")
    cached = None if requests.cached_tokens is None else requests.cached_tokens.tolist()
    if sessions is not None and cached is None:
        cached = [0] * n
    session_of = None if requests.session is None else requests.session.tolist()
    lp = Loop(arr_list, cum_n, cum_t, rej_list if rejected.any() or sessions else None, deque(), prompt_a.tolist(),
              out_a.tolist(), [0] * n, engine.kv_capacity_tokens, engine.max_num_batched_tokens,
              engine.max_num_seqs, table.decode_rows(np.asarray(k_of_b)), table.context_points(), table, k_of_b,
              engine.verify_by_batch().tolist(), np.ascontiguousarray(mix.survival(kmax).T),
              workload, rng_for(seed, STREAM_ACCEPTANCE), table.prefill_time,
              clients, np.full(n, nan), [nan] * n, [nan] * n, [0] * n, {}, [], [], [], [], [0], [], [], [], [], [],
              cache, cached, session_of, sessions, [0] * n if cache is not None else None)
    if sessions is not None:
        place_sends(lp, sessions.due(0.0))
    return lp


def _run(lp: Loop, fast: bool) -> None:
    """The event loop (module docstring), one pass per iteration, until every admitted request has finished."""
    arr, rej, waiting, pre, log = lp.arrivals, lp.rejected, lp.waiting, lp.pre, lp.log
    sess = lp.sessions
    k_of_b, w_of_b, dec_rows, grid, cum_n, cum_t = lp.k_of_b, lp.w_of_b, lp.dec_rows, lp.grid, lp.cum_n, lp.cum_t
    n, cap = len(arr), lp.cap
    run: Running = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64),
                    np.empty((len(lp.surv_t), 0), dtype=np.float64))
    ubuf, upos = lp.urng.random(DRAWS), 0
    dec_kv = pre_kv = na = 0  # KV tokens of decoding requests (sum of their contexts) and of partial prefills
    t = (arr[0] if sess is None else min(arr[0], sess.next_s())) if n else 0.0
    while True:
        if sess is not None and sess.heap and sess.heap[0][0] <= t:
            place_sends(lp, sess.due(t))
        if na < n and arr[na] <= t:
            na = join_arrivals(arr, na, t, waiting, rej)
        nd = len(run[0])
        if nd == 0 and not pre and not waiting:  # idle: on to the next arrival (or a session's next send)
            t = arr[na] if na < n and arr[na] != INF else max(t, sess.next_s()) if sess is not None else INF
            if t == INF:
                break
            continue
        if nd and dec_kv + pre_kv + nd * w_of_b[nd] > cap:  # 1. KV slots for the decodes' tokens
            run, dec_kv, pre_kv, nd = _preempt(lp, run, dec_kv, pre_kv, t)
        k = k_of_b[nd]
        # 2. Chunked prefill of running then waiting requests, within the budget, seats and KV.
        chunks, p_tok, p_ctx, hit_kv, reload_s = _admit(lp, t, nd, dec_kv, pre_kv) if pre or waiting else _NO_CHUNKS
        pre_kv += hit_kv
        if nd == 0 and p_tok == 0:
            pre_kv = _stall(lp, pre_kv)
            continue
        # 3. Price the iteration.
        dt = interpolate_row(dec_rows[nd], grid, dec_kv / nd) if nd else 0.0
        if dt != dt:  # NaN: the table has not evaluated this block yet (StepTable evaluates blocks when first read)
            lp.table.refresh_rows(dec_rows, k_of_b, nd, dec_kv / nd)
            dt = interpolate_row(dec_rows[nd], grid, dec_kv / nd)
        if fast and nd and not pre:  # nothing prefilling, nothing admitted: maybe a steady stretch
            lim = _stretch_limit(lp, t, dt, na, nd, k, len(ubuf) - upos, run)
            if lim >= MIN_STRETCH:
                ids = run[0]
                t, na, dec_kv, upos, run = _stretch(lim, t, dt, na, nd, k, dec_kv, pre_kv, upos, ubuf, run, lp)
                if len(run[0]) < nd:  # the stretch ended with finishes at t
                    _stretch_finished(lp, ids, run[0], t)
                continue
        if p_tok:
            dt += lp.prefill_time(p_tok, p_ctx / p_tok) + reload_s
        t_end = t + dt
        if sess is not None and sess.heap and sess.heap[0][0] <= t_end:
            place_sends(lp, sess.due(t_end))
        running, n_wait = nd + len(pre), len(waiting)
        j = bisect_right(arr, t_end, na)
        area = (cum_n[j] - cum_n[na]) * t_end - (cum_t[j] - cum_t[na])
        tokens = 0
        if nd:  # 4. Decodes emit 1 + A tokens each.
            u = None
            if k:
                if upos + nd > len(ubuf):
                    ubuf, upos = lp.urng.random(max(DRAWS, nd)), 0
                u = ubuf[upos:upos + nd]
                upos += nd
            run, tokens, dec_kv = _decode(lp, run, k, u, t_end, dec_kv)
        if chunks:  # 5. Prefill chunks; a completed prefill emits a token (the first, or the next after a recompute).
            run, pre_kv, dec_kv, first = _complete(lp, chunks, run, t_end, pre_kv, dec_kv)
            tokens += first
        log.append((t, dt, nd, running, n_wait, k if nd else 0, p_tok, tokens, dec_kv + pre_kv, area))
        t = t_end


def _stretch_limit(lp: Loop, t: float, dt: float, na: int, nd: int, k: int, draws_left: int, run: Running) -> int:
    """The most steps a steady stretch from t may take: up to the next arrival (admitted unless seats, budget or KV
    stop it), the draws left (a refill discards the rest of the buffer), a session's next send (the step spanning
    it steps alone) and the first finish."""
    arr, sess = lp.arrivals, lp.sessions
    lim = STRETCH_MAX
    if not lp.waiting and na < len(arr) and dt > 0.0 and arr[na] != INF:
        lim = min(lim, int((arr[na] - t) / dt) + 1)
    if k:
        lim = min(lim, draws_left // nd)
    if sess is not None and sess.heap and dt > 0.0:
        lim = min(lim, int((sess.heap[0][0] - t) / dt))
    if lim >= MIN_STRETCH:
        lim = min(lim, int(np.min(run[2])))
    return lim


def _stretch_finished(lp: Loop, before: IntArray, after: IntArray, t: float) -> None:
    """A stretch ended with finishes at t: the closed loop's clients send, sessions go on (state.finished)."""
    if lp.clients is not None:
        lp.clients.send(len(before) - len(after), t)
    if lp.cache is not None:
        finished(lp, before[~np.isin(before, after)].tolist(), t)


def _preempt(lp: Loop, run: Running, dec_kv: int, pre_kv: int, t: float) -> tuple[Running, int, int, int]:
    """Free KV slots for the decodes' next tokens by recompute (vLLM's PreemptionMode.RECOMPUTE): the newest
    partial prefill first, else the newest running request, back to the front of the queue. Returns the running
    requests, the decode and prefill KV and the decode batch after it."""
    run_id, run_ctx, run_rem, run_s = run
    nd = len(run_id)
    while nd and dec_kv + pre_kv + nd * lp.w_of_b[nd] > lp.cap:
        if lp.pre:
            rid, done, _ = lp.pre.pop()
            pre_kv -= done
        else:
            rid = int(run_id[-1])
            lp.gen[rid] = lp.out[rid] - int(run_rem[-1])
            dec_kv -= int(run_ctx[-1])
            run_id, run_ctx, run_rem, run_s = run_id[:-1], run_ctx[:-1], run_rem[:-1], run_s[:, :-1]
            lp.last_emit[rid] = t
            nd -= 1
        lp.waiting.appendleft(rid)
        lp.preempt[rid] += 1
    return (run_id, run_ctx, run_rem, run_s), dec_kv, pre_kv, nd


def _admit(lp: Loop, t: float, nd: int, dec_kv: int, pre_kv: int
           ) -> tuple[list[tuple[list[int], int]], int, float, int, float]:
    """This step's prefill chunks: partial prefills continue, then waiting requests are admitted in arrival order
    while the token budget, the seats (max_num_seqs) and the KV cache hold their chunk (and their cached prefix,
    which they prefill from: sessions.py); the first that does not fit stops admission (first come, first served).
    Returns the chunks, their tokens, their tokens x context, the cached tokens admitted and their reload seconds
    from the host tier."""
    w = nd * lp.w_of_b[nd]
    budget = lp.budget_max - w
    free = lp.cap - dec_kv - pre_kv - w
    chunks: list[tuple[list[int], int]] = []
    p_tok = 0
    p_ctx = 0.0
    pre, waiting, gen, prompt, sched_s = lp.pre, lp.waiting, lp.gen, lp.prompt, lp.sched_s
    for item in pre:
        c = min(item[2] - item[1], budget, free)
        if c <= 0:
            break
        chunks.append((item, c))
        budget -= c
        free -= c
        p_tok += c
        p_ctx += c * (item[1] + c / 2.0)
    hit_kv, reload_s, cache = 0, 0.0, lp.cache
    while waiting and budget > 0 and nd + len(pre) < lp.max_seqs:
        rid = waiting[0]
        target = prompt[rid] + gen[rid]
        if cache is None:
            c, h = min(target, budget), 0
            if c > free:
                break
        else:
            h = head_hit(lp, rid, lp.cap - free)
            c = min(target - h, budget)
            if h + c > free:
                break
            h, reload = cache.claim(lp.session_of[rid] if lp.session_of else -1, lp.cap - free, target, c, h)
            reload_s += reload
            hit_kv += h
            free -= h
            lp.hit_of[rid] = h  # type: ignore[index]
        waiting.popleft()
        item = [rid, h, target]
        pre.append(item)
        if sched_s[rid] != sched_s[rid]:  # NaN: first time scheduled
            sched_s[rid] = t
        chunks.append((item, c))
        budget -= c
        free -= c
        p_tok += c
        p_ctx += c * (h + c / 2.0)
    return chunks, p_tok, p_ctx, hit_kv, reload_s


def _stall(lp: Loop, pre_kv: int) -> int:
    """Nothing decodes and no chunk fits: partial prefills hold all the KV, so the newest is recomputed."""
    if not lp.pre:
        raise RuntimeError("simulate: scheduler stalled with no runnable request")  # unreachable
    rid, done, _ = lp.pre.pop()
    lp.waiting.appendleft(rid)
    lp.preempt[rid] += 1
    return pre_kv - done


def _decode(lp: Loop, run: Running, k: int, u: FloatArray | None, t_end: float, dec_kv: int
            ) -> tuple[Running, int, int]:
    """The decodes' emissions: 1 + A tokens each, A = #{i <= k : u < S_i} from one uniform per request, capped by
    the remaining output (`workload.sample_accepted` inline); finished requests leave at t_end and free their
    KV. Returns the running requests, the tokens emitted and the decode KV."""
    run_id, run_ctx, run_rem, run_s = run
    step = len(lp.log) + lp.logged[0]
    if u is not None:
        e = (u < run_s[:k]).sum(axis=0)
        e += 1
        np.minimum(e, run_rem, out=e)
        tok = int(e.sum())
        lp.spec_steps.append(step)
        lp.spec_counts.append(e)
        run_rem -= e  # in place: the running arrays are this loop's own (fresh or sliced from its own)
        run_ctx += e
    else:
        tok = len(run_id)
        lp.plain_steps.append((step, tok))
        run_rem -= 1
        run_ctx += 1
    dec_kv += tok
    if not run_rem.all():  # some request emitted its last token
        fin = run_rem == 0
        lp.finish[run_id[fin]] = t_end
        if lp.clients is not None:
            lp.clients.send(int(fin.sum()), t_end)
        if lp.cache is not None:
            finished(lp, run_id[fin].tolist(), t_end)
        dec_kv -= int(run_ctx[fin].sum())
        keep = ~fin
        run_id, run_ctx, run_rem, run_s = run_id[keep], run_ctx[keep], run_rem[keep], run_s[:, keep]
    return (run_id, run_ctx, run_rem, run_s), tok, dec_kv


def _complete(lp: Loop, chunks: list[tuple[list[int], int]], run: Running, t_end: float, pre_kv: int, dec_kv: int
              ) -> tuple[Running, int, int, int]:
    """The step's prefill chunks land; a request whose (re)prefill completes emits a token (its first: TTFT; after
    a recompute, the next, with the gap across the preemption) and joins the decodes, or finishes. Returns the
    running requests, the prefill and decode KV and the tokens emitted."""
    new: list[tuple[int, int, int]] = []
    tokens = 0
    gen, out, first_s = lp.gen, lp.out, lp.first_s
    for item, c in chunks:
        item[1] += c
        pre_kv += c
        if item[1] < item[2]:
            continue
        rid, _, target = item
        lp.pre.remove(item)
        pre_kv -= target
        g = gen[rid] + 1
        gen[rid] = g
        tokens += 1
        if first_s[rid] != first_s[rid]:
            first_s[rid] = t_end
        else:
            lp.resume_gaps.append(t_end - lp.last_emit.pop(rid))
        if g >= out[rid]:
            lp.finish[rid] = t_end
            if lp.clients is not None:
                lp.clients.send(1, t_end)
            if lp.cache is not None:
                finished(lp, [rid], t_end)
        else:
            new.append((rid, target, out[rid] - g))
            dec_kv += target
    if new:
        run_id, run_ctx, run_rem, run_s = run
        ids = np.asarray([x[0] for x in new], dtype=np.int64)
        ctx = np.asarray([x[1] for x in new], dtype=np.int64)
        rem = np.asarray([x[2] for x in new], dtype=np.int64)
        run = (np.concatenate([run_id, ids]), np.concatenate([run_ctx, ctx]), np.concatenate([run_rem, rem]),
               np.concatenate([run_s, lp.surv_t[:, lp.workload[ids]]], axis=1))
    return run, pre_kv, dec_kv, tokens



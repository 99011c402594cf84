"""The event loop: iteration-level simulation of a continuous-batching engine (vLLM / SGLang style).

Each iteration follows vLLM's V1 scheduler (vllm/v1/core/sched/scheduler.py, `schedule`):
1. Running requests are served first, oldest first. Every decoding request takes 1 + k tokens of the
   token budget (max_num_batched_tokens) and KV slots for them (k lookahead slots for the draft).
   When the KV cache cannot hold them, the newest running request is preempted by recompute: its KV
   blocks are freed, it goes back to the front of the waiting queue, and when scheduled again it
   prefills its prompt plus the tokens it had already generated (vLLM's PreemptionMode.RECOMPUTE).
2. Partially prefilled requests continue (chunked prefill), then waiting requests are admitted in
   arrival order while the budget lasts, fewer than max_num_seqs requests run and the KV cache holds
   the chunk; the first that does not fit stops admission (first come, first served).
3. The iteration costs decode_s(batch, mean context, k) + prefill_s(chunk tokens, context), read from a
   `StepTable` (see cost.py for the mixed-step simplification).
4. Each decoding request emits 1 + A tokens, A drawn from its workload class's chain acceptance and
   capped by its remaining output; a request whose prefill completes emits its first token (TTFT).

k comes from the speculation policy at the step's decode batch, reduced where needed so that
batch x (k + 1) fits the token budget (vLLM truncates speculative tokens that do not fit). KV is counted
in tokens (vLLM's 16-token blocks waste < 16 tokens per sequence; pass a capacity net of that).
Requests that could never fit the KV cache alone (prompt + output + k + 1 > capacity) are rejected.

Closed loop (`Requests.concurrency` N, scenario/traffic.py): the first N requests are sent at their arrival;
each finish (or rejection) sends the next request at max(its arrival, that moment), as a benchmark client's
semaphore of N does. The result's `requests.arrival_s` are the send times, so TTFT and e2e count from the
send, as the clients measure them.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from dataclasses import dataclass
from itertools import chain

import numpy as np
import numpy.typing as npt

from specsim.errors import SpecsimError
from specsim.scenario.serving import EngineConfig
from specsim.scenario.traffic import STREAM_ACCEPTANCE, STREAM_CLASSES, Requests, rng_for
from specsim.scenario.workload import AcceptanceMix
from specsim.simulate.cost import StepCost, StepTable, interpolate_row, rows_of
from specsim.simulate.stretch import Loop as _Loop  # `simulate` calls the fast path by these names
from specsim.simulate.stretch import stretch as _stretch

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

    @property
    def completed(self) -> BoolArray:
        return np.asarray(~self.rejected)


def _table_for(cost: StepCost, engine: EngineConfig, k_of_b: list[int], max_context: float) -> StepTable:
    rows = rows_of([k_of_b])
    if isinstance(cost, StepTable):
        if not cost.covers_rows(rows):
            raise SpecsimError(f"step table covers batch <= {cost.max_batch}, k in {list(cost.ks)} (rows evaluated: "
                               f"{int(cost.filled.sum())}); the run needs batch <= {engine.max_num_seqs}, k in "
                               f"{sorted(rows)}")
        return cost
    return StepTable.build(cost, engine.max_num_seqs, rows, max_context, engine.max_num_batched_tokens, rows=rows)


_INF = float("inf")


def _log_array(log: list[tuple[float, float, int, int, int, int, int, int, int, float]],
               blocks: list[tuple[int, FloatArray]]) -> FloatArray:
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


class _Clients:
    """Closed-loop clients (module docstring): request j waits, at +inf in the loop's arrival list, until a finish
    sends it at max(its arrival, then); the prefix sums of admitted arrivals the loop reads grow as they are sent."""

    def __init__(self, arrivals: list[float], arr_list: list[float], cum_n: list[float], cum_t: list[float],
                 rejected: list[bool], sent: int) -> None:
        self.arrivals, self.arr_list, self.cum_n, self.cum_t, self.rejected = arrivals, arr_list, cum_n, cum_t, rejected
        self.sent = sent

    @classmethod
    def start(cls, requests: Requests, arr_list: list[float], cum_n: list[float], cum_t: list[float],
              rejected: list[bool]) -> _Clients | None:
        """The clients of a closed-loop run (None: open loop); the first `concurrency` requests are sent, the rest
        wait (arr_list and the prefix sums are cut to the sent ones, in place)."""
        clients = requests.concurrency
        if clients is None or clients >= requests.n:
            return None
        arrivals = arr_list[:]
        del cum_n[clients + 1:], cum_t[clients + 1:]
        arr_list[clients:] = [_INF] * (requests.n - clients)
        out = cls(arrivals, arr_list, cum_n, cum_t, rejected, clients)
        out.send(sum(rejected[:clients]), 0.0)  # a rejected request frees its client at once
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


#: Steady stretches (see `simulate`): at most this many steps are drawn ahead at once, and a stretch shorter than
#: MIN_STRETCH steps is left to the step-by-step path.
STRETCH_MAX = 1024
MIN_STRETCH = 3


# One long function on purpose (exempt from the 70-line floor): it is the hot loop, one pass per iteration and
# hundreds of thousands of iterations a run, its state held in locals for speed; split into steps it would pay a
# call and attribute reads on every iteration. Its fast path, the steady stretches, runs apart (`stretch.py`).
def simulate(requests: Requests, engine: EngineConfig, cost: StepCost, acceptance: AcceptanceMix | None = None,
             seed: int = 0, *, fast: bool = True) -> SimResult:
    """Run the engine over the requests until every admitted request finishes; deterministic for a seed.

    Steady stretches (decoding only: no partial prefill, nothing admitted, no preemption; they end at the first
    finish, at an arrival that is admitted or at a preemption) advance several steps at once: the stretch's
    accepted tokens are compared in one array from the same uniform draws, in the same order, and each step is
    priced at its own mean context, so the result is identical to stepping one iteration at a time
    (``fast=False``, kept for tests)."""
    n = requests.n
    policy = engine.policy
    kmax = policy.max_k
    if kmax > 0 and acceptance is None:
        raise SpecsimError(f"speculation policy {policy.label} needs an acceptance mix (workload classes)")
    mix = acceptance if acceptance is not None else AcceptanceMix.constant(0.0)
    k_of_b: list[int] = engine.k_by_batch().tolist()
    budget_max, max_seqs, cap = engine.max_num_batched_tokens, engine.max_num_seqs, engine.kv_capacity_tokens
    prompt_a, out_a = requests.prompt_tokens, requests.output_tokens
    longest = float((prompt_a + out_a).max()) if n else 1.0
    table = _table_for(cost, engine, k_of_b, longest + kmax + 1)
    dec_rows = table.decode_rows(np.asarray(k_of_b))
    grid = table.context_points()
    prefill_time = table.prefill_time

    workload = mix.assign(n, rng_for(seed, STREAM_CLASSES))
    surv_t = np.ascontiguousarray(mix.survival(kmax).T)  # (kmax, classes)
    urng = rng_for(seed, STREAM_ACCEPTANCE)
    ubuf = urng.random(1 << 16)
    upos = 0

    rejected = prompt_a + out_a + kmax + 1 > cap
    arr_list: list[float] = requests.arrival_s.tolist()
    admitted = (~rejected).astype(np.float64)
    cum_n: list[float] = np.concatenate([[0.0], np.cumsum(admitted)]).tolist()
    cum_t: list[float] = np.concatenate([[0.0], np.cumsum(requests.arrival_s * admitted)]).tolist()
    any_rejected = bool(rejected.any())
    rej_list: list[bool] = rejected.tolist()
    clients = _Clients.start(requests, arr_list, cum_n, cum_t, rej_list)
    prompt_l: list[int] = prompt_a.tolist()
    out_l: list[int] = out_a.tolist()

    nan = float("nan")
    gen = [0] * n  # tokens generated before the current (re)prefill
    sched_s = [nan] * n
    first_s = [nan] * n
    finish = np.full(n, nan)
    preempt = [0] * n
    last_emit: dict[int, float] = {}
    resume_gaps: list[float] = []

    run_id = np.empty(0, dtype=np.int64)
    run_ctx = np.empty(0, dtype=np.int64)
    run_rem = np.empty(0, dtype=np.int64)
    run_s = np.empty((kmax, 0), dtype=np.float64)  # survival by depth (rows) of each running request (columns)
    dec_kv = 0  # KV tokens of decoding requests (sum of run_ctx)
    pre_kv = 0  # KV tokens of partially prefilled requests
    waiting: deque[int] = deque()
    pre: list[list[int]] = []  # [request, tokens prefilled, tokens to prefill]

    log: list[tuple[float, float, int, int, int, int, int, int, int, float]] = []
    blocks: list[tuple[int, FloatArray]] = []  # steps logged as arrays by the fast path (stretch.Loop)
    logged = [0]  # their steps: a step's index is len(log) + logged[0]
    # emitted-token histogram, counted once at the end: per speculative step its index and its draws' counts
    # (1 + accepted, capped), per plain step its index and its decode batch (each emits 1 token)
    spec_steps: list[int] = []
    spec_counts: list[IntArray] = []
    plain_steps: list[tuple[int, int]] = []
    spec_blocks: list[tuple[int, IntArray]] = []  # steady stretches: first step, counts (steps, decode batch)
    plain_blocks: list[tuple[int, int, int]] = []  # steady stretches without speculation: first step, steps, batch
    loop = _Loop(arr_list, cum_n, cum_t, rej_list if any_rejected else None, waiting, prompt_l, gen, cap, budget_max,
                 max_seqs, dec_rows, grid, table, k_of_b, finish, log, blocks, logged, spec_blocks, plain_blocks)
    na = 0
    t = arr_list[0] if n else 0.0
    while True:
        if na < n and arr_list[na] <= t:
            j = bisect_right(arr_list, t, na)
            waiting.extend([i for i in range(na, j) if not rej_list[i]] if any_rejected else range(na, j))
            na = j
        nd = len(run_id)
        if nd == 0 and not pre and not waiting:
            if na >= n or arr_list[na] == _INF:
                break
            t = arr_list[na]
            continue
        k = k_of_b[nd]
        # 1. KV slots for the decodes' 1 + k tokens; preempt the newest running request by recompute.
        while nd and dec_kv + pre_kv + nd * (k + 1) > cap:
            if pre:
                rid, done, _ = pre.pop()
                pre_kv -= done
            else:
                rid = int(run_id[-1])
                gen[rid] = out_l[rid] - int(run_rem[-1])
                dec_kv -= int(run_ctx[-1])
                run_id, run_ctx, run_rem, run_s = run_id[:-1], run_ctx[:-1], run_rem[:-1], run_s[:, :-1]
                last_emit[rid] = t
                nd -= 1
                k = k_of_b[nd]
            waiting.appendleft(rid)
            preempt[rid] += 1
        # 2. Chunked prefill of running then waiting requests, within the budget, seats and KV.
        budget = budget_max - nd * (k + 1)
        free = cap - dec_kv - pre_kv - nd * (k + 1)
        chunks: list[tuple[list[int], int]] = []
        p_tok = 0
        p_ctx = 0.0
        for item in pre:
            c = min(item[2] - item[1], budget, free)
            if c <= 0:
                break
            chunks.append((item, c))
            budget -= c
            free -= c
            p_tok += c
            p_ctx += c * (item[1] + c / 2.0)
        while waiting and budget > 0 and nd + len(pre) < max_seqs:
            rid = waiting[0]
            target = prompt_l[rid] + gen[rid]
            c = min(target, budget)
            if c > free:
                break
            waiting.popleft()
            item = [rid, 0, target]
            pre.append(item)
            if sched_s[rid] != sched_s[rid]:  # NaN: first time scheduled
                sched_s[rid] = t
            chunks.append((item, c))
            budget -= c
            free -= c
            p_tok += c
            p_ctx += c * c / 2.0
        if nd == 0 and p_tok == 0:
            if not pre:
                raise RuntimeError("simulate: scheduler stalled with no runnable request")  # unreachable
            rid, done, _ = pre.pop()  # partial prefills hold all the KV: recompute the newest
            pre_kv -= done
            waiting.appendleft(rid)
            preempt[rid] += 1
            continue
        # 3. Price the iteration.
        dt = interpolate_row(dec_rows[nd], grid, dec_kv / nd) if nd else 0.0
        if dt != dt:  # NaN: the table has not evaluated this block yet (StepTable evaluates blocks when first read)
            table.refresh_rows(dec_rows, k_of_b, nd, dec_kv / nd)
            dt = interpolate_row(dec_rows[nd], grid, dec_kv / nd)
        if fast and nd and not pre:  # nothing prefilling, nothing admitted: maybe a steady stretch
            lim = STRETCH_MAX
            if not waiting and na < n and dt > 0.0 and arr_list[na] != _INF:  # an arrival is admitted unless
                # seats, budget or KV stop it
                lim = min(lim, int((arr_list[na] - t) / dt) + 1)
            if k:
                lim = min(lim, (len(ubuf) - upos) // nd)  # the draws left in the buffer (a refill discards the rest)
            if lim >= MIN_STRETCH:  # the first finish comes within min(remaining) steps
                lim = min(lim, int(run_rem.min()))
            if lim >= MIN_STRETCH:
                t, na, dec_kv, upos, (run_id, run_ctx, run_rem, run_s) = _stretch(
                    lim, t, dt, na, nd, k, dec_kv, pre_kv, upos, ubuf, (run_id, run_ctx, run_rem, run_s), loop)
                if clients is not None and len(run_id) < nd:  # the stretch ended with finishes at t
                    clients.send(nd - len(run_id), t)
                continue
        if p_tok:
            dt += prefill_time(p_tok, p_ctx / p_tok)
        t_end = t + dt
        running = nd + len(pre)
        n_wait = len(waiting)
        j = bisect_right(arr_list, t_end, na)
        area = (cum_n[j] - cum_n[na]) * t_end - (cum_t[j] - cum_t[na])
        tokens = 0
        # 4. Decodes emit 1 + A tokens each.
        if nd:
            if k:
                if upos + nd > len(ubuf):
                    ubuf = urng.random(max(1 << 16, nd))
                    upos = 0
                u = ubuf[upos:upos + nd]
                upos += nd
                # sample_accepted inline: A = #{i <= k : u < S_i}, then 1 + A capped by the remaining output
                e = (u < run_s[:k]).sum(axis=0)
                e += 1
                np.minimum(e, run_rem, out=e)
                tok = int(e.sum())
                spec_steps.append(len(log) + logged[0])
                spec_counts.append(e)
                run_rem = run_rem - e
                run_ctx = run_ctx + e
            else:
                tok = nd
                plain_steps.append((len(log) + logged[0], nd))
                run_rem = run_rem - 1
                run_ctx = run_ctx + 1
            dec_kv += tok
            tokens += tok
            if not run_rem.all():  # some request emitted its last token
                fin = run_rem == 0
                finish[run_id[fin]] = t_end
                if clients is not None:
                    clients.send(int(fin.sum()), t_end)
                dec_kv -= int(run_ctx[fin].sum())
                keep = ~fin
                run_id, run_ctx, run_rem, run_s = run_id[keep], run_ctx[keep], run_rem[keep], run_s[:, keep]
        # 5. Prefill chunks; a completed prefill emits a token (the first, or the next after a recompute).
        if chunks:
            new: list[tuple[int, int, int]] = []
            for item, c in chunks:
                item[1] += c
                pre_kv += c
                if item[1] < item[2]:
                    continue
                rid, _, target = item
                pre.remove(item)
                pre_kv -= target
                g = gen[rid] + 1
                gen[rid] = g
                tokens += 1
                if first_s[rid] != first_s[rid]:
                    first_s[rid] = t_end
                else:
                    resume_gaps.append(t_end - last_emit.pop(rid))
                if g >= out_l[rid]:
                    finish[rid] = t_end
                    if clients is not None:
                        clients.send(1, t_end)
                else:
                    new.append((rid, target, out_l[rid] - g))
                    dec_kv += target
            if new:
                ids = np.asarray([x[0] for x in new], dtype=np.int64)
                run_id = np.concatenate([run_id, ids])
                run_ctx = np.concatenate([run_ctx, np.asarray([x[1] for x in new], dtype=np.int64)])
                run_rem = np.concatenate([run_rem, np.asarray([x[2] for x in new], dtype=np.int64)])
                run_s = np.concatenate([run_s, surv_t[:, workload[ids]]], axis=1)
        log.append((t, dt, nd, running, n_wait, k if nd else 0, p_tok, tokens, dec_kv + pre_kv, area))
        t = t_end

    cols = _log_array(log, blocks)
    steps_n = len(cols)
    width = kmax + 2
    hist = np.zeros((steps_n, width), dtype=np.int64)
    if spec_steps or spec_blocks:
        idx = [np.repeat(np.asarray(spec_steps, dtype=np.int64), [len(x) for x in spec_counts])]
        idx += [np.repeat(np.arange(first, first + len(b), dtype=np.int64), b.shape[1]) for first, b in spec_blocks]
        counts = [*spec_counts, *(b.ravel() for _, b in spec_blocks)]
        hist += np.bincount(np.concatenate(idx) * width + np.concatenate(counts),
                            minlength=steps_n * width).reshape(steps_n, width)
    if plain_steps:
        at, batch = np.asarray(plain_steps, dtype=np.int64).reshape(-1, 2).T
        hist[at, 1] = batch
    for first, m, batch_size in plain_blocks:
        hist[first:first + m, 1] = batch_size
    steps = StepLog(cols[:, 0], cols[:, 1], cols[:, 2].astype(np.int64), cols[:, 3].astype(np.int64),
                    cols[:, 4].astype(np.int64), cols[:, 5].astype(np.int64), cols[:, 6].astype(np.int64),
                    cols[:, 7].astype(np.int64), cols[:, 8].astype(np.int64), cols[:, 9], hist)
    if clients is not None:  # the send times: TTFT and e2e count from them
        requests = Requests(np.asarray(arr_list), prompt_a, out_a, requests.concurrency)
    return SimResult(requests, engine, seed, workload, np.asarray(sched_s), np.asarray(first_s), finish,
                     np.asarray(preempt, dtype=np.int64), rejected, steps, np.asarray(resume_gaps, dtype=np.float64))

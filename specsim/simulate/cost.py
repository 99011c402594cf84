"""Step costs for the serving simulation: the caller's `StepCost`, a tabulated copy, and a hand-checkable model.

The planner supplies a `StepCost` (seconds of one decode iteration and of one prefill pass). The event
loop never calls it per iteration: `StepTable.build` evaluates it once on a grid (batch 1..max exact,
k exact, a geometric grid of contexts, a geometric grid of prefill tokens) and interpolates linearly in
context (and in prefill tokens), as Vidur's execution-time predictors tabulate kernel costs
(vidur/execution_time_predictor/) before the simulator runs.

Simplification (stated here once): an iteration that carries both decodes and a prefill chunk costs
``decode_s(batch, ctx, k) + prefill_s(chunk, ctx)``. A real fused pass pays the engine's fixed per-step
overhead once, not twice, and overlaps the two; the sum overstates a mixed step by at most one pass's
fixed overhead. Pure decode and pure prefill steps are priced exactly by the table.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from specsim.errors import SpecsimError

FloatArray = npt.NDArray[np.float64]


@runtime_checkable
class StepCost(Protocol):
    """Seconds of one engine iteration, vectorised over numpy arrays (broadcasting)."""

    def decode_s(self, batch: np.ndarray, mean_context: np.ndarray, k: np.ndarray) -> np.ndarray:
        """One decode iteration (draft + verify + engine overheads) for `batch` running sequences whose
        mean KV length is `mean_context`, at draft length k (0 = no speculation)."""
        ...

    def prefill_s(self, tokens: np.ndarray, mean_context: np.ndarray) -> np.ndarray:
        """One pass over `tokens` prompt tokens (one chunk or several prompts) attending to `mean_context`."""
        ...


@dataclass(frozen=True)
class AnalyticCost:
    """A linear cost for hand checks: decode = a + b * batch * (k + 1) + c * batch * context,
    prefill = d + e * tokens (seconds)."""

    step_s: float = 0.0  # a: fixed per decode iteration
    per_token_s: float = 0.0  # b: per verified token (batch x (k+1))
    per_token_context_s: float = 0.0  # c: per sequence per token of context (KV reads)
    prefill_fixed_s: float = 0.0  # d: fixed per prefill pass
    prefill_per_token_s: float = 0.0  # e: per prompt token

    def decode_s(self, batch: np.ndarray, mean_context: np.ndarray, k: np.ndarray) -> np.ndarray:
        b = np.asarray(batch, dtype=np.float64)
        return (self.step_s + self.per_token_s * b * (np.asarray(k, dtype=np.float64) + 1.0)
                + self.per_token_context_s * b * np.asarray(mean_context, dtype=np.float64))

    def prefill_s(self, tokens: np.ndarray, mean_context: np.ndarray) -> np.ndarray:
        t = np.asarray(tokens, dtype=np.float64)
        return self.prefill_fixed_s + self.prefill_per_token_s * t + 0.0 * np.asarray(mean_context, dtype=np.float64)


def geometric_grid(top: float, ratio: float, start: float = 1.0) -> FloatArray:
    """[0, start, start*r, start*r^2, ..., >= top]: a grid whose relative spacing is at most `ratio`."""
    if ratio <= 1.0:
        raise SpecsimError(f"grid ratio must be > 1, got {ratio}")
    n = max(1, math.ceil(math.log(max(top, start * ratio) / start) / math.log(ratio)))
    return np.concatenate([[0.0], start * ratio ** np.arange(n + 1, dtype=np.float64)])


def _locate(grid: FloatArray, x: np.ndarray) -> tuple[npt.NDArray[np.intp], FloatArray]:
    """Segment index and fraction for linear interpolation (linear extrapolation past the ends)."""
    j = np.clip(np.searchsorted(grid, x, side="right") - 1, 0, len(grid) - 2)
    f = (x - grid[j]) / (grid[j + 1] - grid[j])
    return j, f


#: A table's decode costs are evaluated in blocks of BLOCK_BATCH batches x BLOCK_CONTEXT context points, each when
#: first read (a simulation reaches a small part of the batch x context grid: the mean context of a batch stays
#: near the traffic's), one cost call per block.
BLOCK_BATCH = 32
BLOCK_CONTEXT = 32


class StepTable:
    """A `StepCost` evaluated once on a grid; itself a `StepCost` (vectorised) with scalar fast paths.

    Decode: exact in batch (1..max_batch) and in k (the given values), linear in context between the points
    of a geometric grid (relative spacing `context_ratio`). Prefill: bilinear in (tokens, context) on
    geometric grids. Past the grid's ends the table extrapolates linearly. Exact for costs linear in context;
    at a roofline kink (max of compute and memory time) the error is at most about (ratio - 1) / 4, i.e. 1%
    at the default spacing 1.04 (tests/simulate/test_cost.py).

    A table built with its cost (`build`) evaluates its decode rows lazily, a block of BLOCK_BATCH batches x
    BLOCK_CONTEXT contexts when a lookup first reads it (`ensure`); every point's value is the one a full build
    gives (the cost is elementwise). `decode` (and pickling) evaluate every row first.
    """

    def __init__(self, ks: tuple[int, ...], context_grid: FloatArray, decode: FloatArray,
                 token_grid: FloatArray, prefill: FloatArray, filled: npt.NDArray[np.bool_] | None = None,
                 cost: StepCost | None = None, done: npt.NDArray[np.bool_] | None = None) -> None:
        self.ks = ks
        self.context_grid = context_grid
        self._decode = decode  # (len(ks), max_batch + 1, len(context_grid)); batch 0 row unused; NaN: not evaluated
        self.token_grid = token_grid
        self.prefill = prefill  # (len(token_grid), len(context_grid))
        if filled is None:  # every row evaluated
            filled = np.ones(decode.shape[:2], dtype=np.bool_)
            filled[:, 0] = False
        self.filled = filled  # (len(ks), max_batch + 1): which (k, batch) rows the table holds (NaN elsewhere)
        n_blocks = -(-len(context_grid) // BLOCK_CONTEXT)
        if done is None:  # without a cost to evaluate with, every held row is evaluated already
            done = np.broadcast_to(filled[:, :, None], (*filled.shape, n_blocks)).copy() if cost is None else \
                np.zeros((*filled.shape, n_blocks), dtype=np.bool_)
        self._done = done  # (len(ks), max_batch + 1, context blocks): rows' blocks evaluated
        self._cost = cost
        self._k_index = {k: i for i, k in enumerate(ks)}
        self._ctx_list: list[float] = context_grid.tolist()
        self._tok_list: list[float] = token_grid.tolist()
        self._prefill_rows: list[list[float]] = prefill.tolist()

    @property
    def decode(self) -> FloatArray:
        """Decode costs (len(ks), max_batch + 1, len(context_grid)), every held row evaluated (NaN elsewhere)."""
        self.complete()
        return self._decode

    def complete(self) -> StepTable:
        """Evaluate every held row's every block (a no-op for a table evaluated already); itself."""
        for i in range(len(self.ks)):
            rows = np.flatnonzero(self.filled[i])
            for bb in sorted({int(b) // BLOCK_BATCH for b in rows}):
                for cb in range(self._done.shape[2]):
                    self._evaluate(i, bb, cb)
        return self

    def ensure(self, i: int, batch: int, j: int) -> bool:
        """Evaluate the blocks holding row (ks[i], batch) at context points j and j + 1 (the segment a lookup at
        segment j reads); whether anything was evaluated."""
        bb = batch // BLOCK_BATCH
        did = False
        for cb in {j // BLOCK_CONTEXT, (j + 1) // BLOCK_CONTEXT}:
            if cb < self._done.shape[2] and not self._done[i, batch, cb]:
                did = self._evaluate(i, bb, cb) or did
        return did

    def _evaluate(self, i: int, bb: int, cb: int) -> bool:
        """Evaluate block (ks[i], batch block bb, context block cb) of the held rows not yet evaluated."""
        lo, hi = bb * BLOCK_BATCH, min((bb + 1) * BLOCK_BATCH, self.filled.shape[1])
        c0, c1 = cb * BLOCK_CONTEXT, min((cb + 1) * BLOCK_CONTEXT, len(self.context_grid))
        bs = [b for b in range(lo, hi) if self.filled[i, b] and not self._done[i, b, cb]]
        if not bs:
            return False
        if self._cost is None:
            raise SpecsimError("step table: a held row was never evaluated and the table has no cost to evaluate it")
        b = np.asarray(bs, dtype=np.float64)
        ctx = self.context_grid[c0:c1]
        vals = np.broadcast_to(np.asarray(self._cost.decode_s(b[:, None], ctx[None, :],
                                                              np.full(1, self.ks[i])[:, None]),
                                          dtype=np.float64), (len(bs), len(ctx)))
        if not np.isfinite(vals).all() or vals.min() < 0:
            raise SpecsimError("step table: the step cost returned a negative or non-finite time")
        self._decode[i, bs, c0:c1] = vals
        self._done[i, bs, cb] = True
        return True

    @property
    def max_batch(self) -> int:
        return int(self._decode.shape[1] - 1)

    @classmethod
    def build(cls, cost: StepCost, max_batch: int, ks: Iterable[int], max_context: float,
              max_prefill_tokens: int, context_ratio: float = 1.04, token_ratio: float = 1.04,
              rows: Mapping[int, Iterable[int]] | None = None) -> StepTable:
        """Evaluate `cost` on the grid: batch 1..max_batch, each k in ks, contexts 0..max_context
        (geometric, spacing <= context_ratio), prefill tokens 0..max_prefill_tokens (spacing <= token_ratio).

        `rows` ({k: batches}) evaluates only those decode rows (others are NaN and refused by lookups): a
        policy runs one k per batch, so a table for a few policies needs a fraction of the k x batch grid.
        Each point's value is the same whichever rows are evaluated (the cost is elementwise)."""
        if max_batch < 1:
            raise SpecsimError(f"step table: max_batch must be >= 1, got {max_batch}")
        k_values = tuple(sorted({int(k) for k in ks} | {0} | ({int(k) for k in rows} if rows else set())))
        if k_values[0] < 0:
            raise SpecsimError(f"step table: k must be >= 0, got {k_values[0]}")
        ctx = geometric_grid(max(max_context, 2.0), context_ratio)
        tok = geometric_grid(max(max_prefill_tokens, 2), token_ratio)
        dec = np.full((len(k_values), max_batch + 1, len(ctx)), np.nan)
        dec[:, 0, :] = 0.0  # batch 0: no decode step
        filled = np.zeros(dec.shape[:2], dtype=np.bool_)
        for i, (k, bs) in enumerate(_wanted_rows(k_values, max_batch, rows).items()):
            assert k == k_values[i]
            filled[i, bs] = True  # held; evaluated block by block when read
        pre = np.asarray(cost.prefill_s(tok[:, None], ctx[None, :]), dtype=np.float64)
        pre = np.broadcast_to(pre, (len(tok), len(ctx))).copy()
        pre[0, :] = 0.0  # no prompt tokens: no prefill pass
        if not np.isfinite(pre).all() or pre.min() < 0:
            raise SpecsimError("step table: the step cost returned a negative or non-finite time")
        return cls(k_values, ctx, dec, tok, pre, filled, cost)

    def with_rows(self, cost: StepCost, rows: Mapping[int, Iterable[int]]) -> StepTable:
        """This table with the given decode rows ({k: batches}) held too (same grids; `cost` must be the cost the
        table was built from), evaluated block by block when read; itself when it already holds them."""
        if self.covers_rows(rows):
            return self
        k_values = tuple(sorted(set(self.ks) | {int(k) for k in rows}))
        idx = [k_values.index(k) for k in self.ks]
        dec = np.full((len(k_values), *self._decode.shape[1:]), np.nan)
        dec[:, 0, :] = 0.0
        filled = np.zeros(dec.shape[:2], dtype=np.bool_)
        done = np.zeros((*dec.shape[:2], self._done.shape[2]), dtype=np.bool_)
        dec[idx], filled[idx], done[idx] = self._decode, self.filled, self._done
        for k, bs in _wanted_rows(k_values, self.max_batch, rows).items():
            filled[k_values.index(k), bs] = True
        return StepTable(k_values, self.context_grid, dec, self.token_grid, self.prefill, filled, cost, done)

    def covers(self, max_batch: int, ks: Iterable[int]) -> bool:
        """Whether the table holds every batch up to max_batch at every k in ks."""
        return max_batch <= self.max_batch and all(
            int(k) in self._k_index and bool(self.filled[self._k_index[int(k)], 1:max_batch + 1].all()) for k in ks)

    def covers_rows(self, rows: Mapping[int, Iterable[int]]) -> bool:
        """Whether the table holds these decode rows ({k: batches})."""
        for k, bs in rows.items():
            i = self._k_index.get(int(k))
            b = np.fromiter((int(x) for x in bs), dtype=np.intp)
            if b.size and (i is None or np.min(b) < 1 or np.max(b) > self.max_batch or not self.filled[i, b].all()):
                return False
        return True

    # Vectorised StepCost interface.
    def decode_s(self, batch: np.ndarray, mean_context: np.ndarray, k: np.ndarray) -> np.ndarray:
        b_arr, c_arr, k_arr = np.broadcast_arrays(np.asarray(batch), np.asarray(mean_context, dtype=np.float64),
                                                  np.asarray(k))
        b_int = b_arr.astype(np.intp)
        if b_int.size and (np.min(b_int) < 1 or np.max(b_int) > self.max_batch or not np.array_equal(b_int, b_arr)):
            raise SpecsimError(f"step table: batch must be an integer in 1..{self.max_batch}")
        ks = np.asarray(self.ks)
        ki = np.searchsorted(ks, k_arr)
        if ki.size and (np.max(ki) >= len(ks) or not np.array_equal(ks[ki], k_arr)):
            raise SpecsimError(f"step table: k must be one of {list(self.ks)}")
        if ki.size and not self.filled[ki, b_int].all():
            raise SpecsimError("step table: a (k, batch) row asked for was not evaluated (see StepTable.build rows)")
        j, f = _locate(self.context_grid, c_arr)
        points = zip(ki.ravel().tolist(), b_int.ravel().tolist(), j.ravel().tolist(), strict=True)
        for i, b, jj in set(points):
            self.ensure(i, b, jj)
        lo = self._decode[ki, b_int, j]
        hi = self._decode[ki, b_int, j + 1]
        return np.asarray(lo + f * (hi - lo))

    def prefill_s(self, tokens: np.ndarray, mean_context: np.ndarray) -> np.ndarray:
        t_arr, c_arr = np.broadcast_arrays(np.asarray(tokens, dtype=np.float64),
                                           np.asarray(mean_context, dtype=np.float64))
        i, g = _locate(self.token_grid, t_arr)
        j, f = _locate(self.context_grid, c_arr)
        p = self.prefill
        top = p[i, j] + f * (p[i, j + 1] - p[i, j])
        bot = p[i + 1, j] + f * (p[i + 1, j + 1] - p[i + 1, j])
        return np.asarray(top + g * (bot - top))

    # Scalar fast paths for the event loop.
    def decode_rows(self, k_by_batch: np.ndarray) -> list[list[float]]:
        """Row b: decode times over the context grid at batch b and k = k_by_batch[b] (row 0 empty)."""
        rows: list[list[float]] = [[]]
        for b in range(1, len(k_by_batch)):
            i = self._k_index[int(k_by_batch[b])]
            if not self.filled[i, b]:
                raise SpecsimError(f"step table: batch {b} at k = {int(k_by_batch[b])} was not evaluated")
            rows.append(self._decode[i, b].tolist())
        return rows

    def refresh_rows(self, rows: list[list[float]], k_by_batch: Sequence[int], batch: float, context: float) -> bool:
        """Before a lookup at (batch, mean context) in `decode_rows(k_by_batch)`'s rows: evaluate the blocks the
        lookup reads if they are not yet, and refresh those rows in place; whether anything changed."""
        b = int(batch)
        cg = self._ctx_list
        j = min(max(bisect_right(cg, context) - 1, 0), len(cg) - 2)
        if not self.ensure(self._k_index[int(k_by_batch[b])], b, j):
            return False
        lo = b // BLOCK_BATCH * BLOCK_BATCH
        for bb in range(max(lo, 1), min(lo + BLOCK_BATCH, len(rows))):
            rows[bb] = self._decode[self._k_index[int(k_by_batch[bb])], bb].tolist()
        return True

    def context_points(self) -> list[float]:
        return self._ctx_list

    def prefill_time(self, tokens: float, context: float) -> float:
        """prefill_s at one point (bilinear), in plain Python floats."""
        tg, cg = self._tok_list, self._ctx_list
        i = min(max(bisect_right(tg, tokens) - 1, 0), len(tg) - 2)
        j = min(max(bisect_right(cg, context) - 1, 0), len(cg) - 2)
        g = (tokens - tg[i]) / (tg[i + 1] - tg[i])
        f = (context - cg[j]) / (cg[j + 1] - cg[j])
        r0, r1 = self._prefill_rows[i], self._prefill_rows[i + 1]
        top = r0[j] + f * (r0[j + 1] - r0[j])
        bot = r1[j] + f * (r1[j + 1] - r1[j])
        return top + g * (bot - top)

    def __getstate__(self) -> dict[str, object]:  # every held row evaluated: the cost does not travel
        return {"ks": self.ks, "context_grid": self.context_grid, "decode": self.decode,
                "token_grid": self.token_grid, "prefill": self.prefill, "filled": self.filled}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__init__(**state)  # type: ignore[misc]


#: Step tables kept by `cached_table` (the most recently used first): a report tabulates a draft's costs for the
#: SLO search and again for its serving section, each table 1-2 s of the planner's step arithmetic.
TABLE_CACHE_SIZE = 8
_TABLES: list[tuple[StepCost, int, int, StepTable]] = []


def cached_table(cost: StepCost, max_batch: int, max_prefill_tokens: int, rows: Mapping[int, Iterable[int]],
                 max_context: float) -> StepTable:
    """`StepTable.build(cost, max_batch, rows, max_context, max_prefill_tokens, rows=rows)`, reusing a table
    built earlier in this process for an equal cost (dataclass equality: the same target and draft) and the same
    limits: the rows it lacks are evaluated and added, and it is rebuilt larger (keeping its rows) only when
    `max_context` is past its grid. Every value equals a fresh build's: the grids are the same geometric grids
    (a longer one extends a shorter one point for point) and each point is evaluated alone."""
    hit = next((i for i, (c, mb, mp, _) in enumerate(_TABLES)
                if mb == max_batch and mp == max_prefill_tokens and type(c) is type(cost) and c == cost), None)
    old = None if hit is None else _TABLES.pop(hit)[3]
    if old is not None and old.context_grid[-1] >= max_context:
        table = old.with_rows(cost, rows)
    else:
        merged = {int(k): set(bs) for k, bs in rows.items()}
        if old is not None:
            for i, k in enumerate(old.ks):
                merged.setdefault(k, set()).update(np.flatnonzero(old.filled[i]).tolist())
            max_context = max(max_context, float(old.context_grid[-1]))
        table = StepTable.build(cost, max_batch, merged, max_context, max_prefill_tokens, rows=merged)
    _TABLES.insert(0, (cost, max_batch, max_prefill_tokens, table))
    del _TABLES[TABLE_CACHE_SIZE:]
    return table


def clear_table_cache() -> None:
    _TABLES.clear()


def rows_of(k_by_batch: Iterable[npt.ArrayLike]) -> dict[int, set[int]]:
    """The decode rows ({k: batches}, batch >= 1) that engines with these k-by-batch tables (index = batch) read."""
    rows: dict[int, set[int]] = {0: set()}
    for table in k_by_batch:
        for b, k in enumerate(np.asarray(table).tolist()[1:], start=1):
            rows.setdefault(int(k), set()).add(b)
    return rows


def _wanted_rows(ks: tuple[int, ...], max_batch: int, rows: Mapping[int, Iterable[int]] | None
                 ) -> dict[int, list[int]]:
    """Batches to evaluate per k: those asked for (within 1..max_batch), or all of them."""
    if rows is None:
        return {k: list(range(1, max_batch + 1)) for k in ks}
    wanted = {k: sorted({int(b) for b in rows.get(k, ())}) for k in ks}
    for k, bs in wanted.items():
        if bs and (bs[0] < 1 or bs[-1] > max_batch):
            raise SpecsimError(f"step table: batches for k = {k} must lie in 1..{max_batch}")
    return wanted


def interpolate_row(row: list[float], grid: list[float], x: float) -> float:
    """Linear interpolation of `row` (values on `grid`) at x, extrapolating past the ends."""
    j = min(max(bisect_right(grid, x) - 1, 0), len(grid) - 2)
    lo = row[j]
    return lo + (x - grid[j]) / (grid[j + 1] - grid[j]) * (row[j + 1] - lo)

"""A bounded memo of array results for the cost model's pure functions (`engines.passes.pass_time_s`,
`cost.ops._gemm`): a plan, its sensitivity re-plans and the serving simulation price the same passes and
linear layers many times over. And `unique_rows`, for functions evaluated once per distinct point.

Keys hold everything a result depends on: the profiles by identity (frozen; the entry keeps them alive, so
an identity is never reused while its entry lives), the other arguments by value, and the arrays by dtype,
shape and bytes. Least recently used entries are dropped first; a hit hands out copies."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable

import numpy as np
from numpy.typing import NDArray

from specsim.cost.roofline import Array


def unique_rows(*columns: Array) -> tuple[Array, NDArray[np.intp]]:
    """`np.unique(np.stack(columns, axis=1), axis=0, return_inverse=True)` of equal-length 1-D float columns: the
    distinct rows, in the same (lexicographic) order, and each row's index among them (1-D), by one lexsort:
    np.unique over rows compares them as records, 5x slower. Columns holding NaN go to np.unique itself."""
    points = np.stack(columns, axis=1)
    if np.isnan(points).any():
        unique, inverse = np.unique(points, axis=0, return_inverse=True)
        return unique, inverse.reshape(-1)
    order = np.lexsort(columns[::-1])
    ordered = points[order]
    first = np.ones(len(ordered), dtype=bool)
    first[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    inverse = np.empty(len(ordered), dtype=np.intp)
    inverse[order] = np.cumsum(first) - 1
    return ordered[first], inverse


class ArrayMemo:
    def __init__(self, size: int, max_points: int) -> None:
        self.size = size
        self.max_points = max_points  # calls over larger arrays are evaluated, not kept
        self._entries: OrderedDict[tuple[Hashable, ...], tuple[tuple[object, ...], tuple[Array, ...]]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()

    def key(self, owners: tuple[object, ...], values: tuple[Hashable, ...],
            arrays: tuple[np.ndarray, ...]) -> tuple[Hashable, ...] | None:
        """The key of a call, or None when it is not to be kept (an array too large, a value unhashable)."""
        if any(a.size > self.max_points for a in arrays):
            return None
        key = (*(id(o) for o in owners), *values, *((a.dtype.str, a.shape, a.tobytes()) for a in arrays))
        try:
            hash(key)
        except TypeError:
            return None
        return key

    def get(self, key: tuple[Hashable, ...] | None, owners: tuple[object, ...]) -> tuple[Array, ...] | None:
        hit = None if key is None else self._entries.get(key)
        if hit is None or any(a is not b for a, b in zip(hit[0], owners, strict=True)):
            return None
        self._entries.move_to_end(key)  # type: ignore[arg-type]
        return tuple(v.copy() for v in hit[1])

    def put(self, key: tuple[Hashable, ...] | None, owners: tuple[object, ...], values: tuple[Array, ...]) -> None:
        if key is None:
            return
        self._entries[key] = (owners, tuple(np.array(v, dtype=float) for v in values))
        if len(self._entries) > self.size:
            self._entries.popitem(last=False)

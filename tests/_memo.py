"""Test support: a module fixture's mapping whose values are made on first use, so that a worker builds only the
keys its tests ask for (tests/_xdist.py sends the tests of one key to one pytest-xdist worker)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Lazy(dict[K, V]):
    """`lazy[key]` is `make(key)`, made once (a plain dict otherwise)."""

    def __init__(self, make: Callable[[K], V]) -> None:
        super().__init__()
        self._make = make

    def __missing__(self, key: K) -> V:
        value = self[key] = self._make(key)
        return value

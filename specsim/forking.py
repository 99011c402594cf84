"""The fork context of specsim's worker pools (the report's figures and re-plans, the serving sweeps, the
published corpus's crossovers).

Workers are forked so that they inherit the parent's data (scenarios, figures, step tables) without pickling.
Python 3.12+ warns (DeprecationWarning) at each fork while the parent has threads, and a pool's own
management thread is one: a second pool forked beside the first always warns. Here the children only
compute on what they inherited and return it through the pool, so the warning is silenced for these forks
alone (it reached a bad-input run's captured warnings on 3.13)."""

from __future__ import annotations

import gc
import multiprocessing
import warnings
from multiprocessing import context as mp_context

_MESSAGE = r"This process \(pid=\d+\) is multi-threaded, use of fork\(\) may lead to deadlocks"


class _QuietForkProcess(mp_context.ForkProcess):
    def start(self) -> None:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_MESSAGE, category=DeprecationWarning)
            gc.freeze()
            try:
                super().start()
            finally:
                gc.unfreeze()


class _QuietForkContext(mp_context.ForkContext):
    Process = _QuietForkProcess


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def fork_context() -> mp_context.ForkContext:
    """multiprocessing's fork context whose forks do not warn about the parent's threads."""
    return _QuietForkContext()

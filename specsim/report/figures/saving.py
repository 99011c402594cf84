"""Saving figures as PNG files: each drawn once, several at once over forked workers."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def save_png(fig: Figure, path: str, dpi: int = 100) -> None:
    """The figure as a PNG file. On its own Agg canvas at its own dpi (every figure here) it is drawn once, laid
    out inside that draw: `savefig` draws it twice (once only to run the layout engine, then again with the
    layout frozen), for the same pixels."""
    if isinstance(fig.canvas, FigureCanvasAgg) and fig.dpi == dpi:
        fig.canvas.print_png(path)
    else:
        fig.savefig(path, dpi=dpi, format="png")


_PENDING: list[tuple[Figure, str, int]] = []  # set before forking: workers inherit it, nothing is pickled


def _save_pending(i: int) -> None:
    fig, path, dpi = _PENDING[i]
    save_png(fig, path, dpi)


def save_pngs(jobs: Sequence[tuple[Figure, str]], dpi: int = 100) -> None:
    """Render several figures, spread over the CPUs by forked workers where the platform forks (figure
    layout and rasterising are most of a report's time), serially otherwise or if the pool fails."""
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from specsim.forking import fork_context

    workers = min(os.cpu_count() or 1, len(jobs), 4)
    if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
        _PENDING[:] = [(fig, path, dpi) for fig, path in jobs]
        try:
            with ProcessPoolExecutor(workers, mp_context=fork_context()) as pool:
                list(pool.map(_save_pending, range(len(jobs))))
            return
        except (OSError, RuntimeError, BrokenProcessPool):
            pass
        finally:
            _PENDING.clear()
    for fig, path in jobs:
        save_png(fig, path, dpi)

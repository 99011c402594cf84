from __future__ import annotations

import os
from pathlib import Path

import pytest

# One pytest-xdist worker runs on each core (pyproject.toml's `-n auto`): numpy's BLAS (OpenBLAS) runs one thread in
# each, not a pool per worker whose threads (spinning while they wait) take the other workers' cores; set before
# numpy is first imported (this file is loaded before the test modules, on every worker).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# The CLI's tables fit the terminal (rich reads COLUMNS): the tests read them at the 80 columns the project promises,
# whatever terminal runs pytest (tools/readme_figures.py runs it with COLUMNS=200)
os.environ["COLUMNS"] = "80"
VIDUR = Path(__file__).resolve().parents[1].parent / "shared" / "reference" / "vidur"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # type: ignore[no-untyped-def]
    """`--dist loadscope` (pyproject.toml) with this suite's units of work and order (tests/_xdist.py)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from tests._xdist import Scheduling

    return Scheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """On an xdist worker: the modules that take longest first (tests/_xdist.FIRST); a stable sort, so that every
    worker collects the same order."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        from tests._xdist import rank

        items.sort(key=lambda item: rank(item.nodeid))


@pytest.fixture(scope="session")
def vidur_dir() -> Path:
    """../shared/reference/vidur (real H100/A100 kernel timings); tests that need it skip without it."""
    if not (VIDUR / "compute").is_dir():
        pytest.skip("../shared/reference/vidur is absent")
    return VIDUR


@pytest.fixture(scope="session")
def vidur_table(vidur_dir: Path):
    from specsim.calibration.vidur import import_vidur

    return import_vidur(vidur_dir)

"""How the test run is shared out over pytest-xdist's workers (`-n auto --dist loadscope`, pyproject.toml).

A module's tests run on one worker by default, so that its module fixtures and module-level caches (loaded tables,
built reports, scored corpora) are made once per run (xdist's loadscope groups by class; here by file). Exceptions
(SPLIT): modules of heavy, independent tests send each test to whichever worker is free; modules whose fixtures
build one value per parameter (tests/_memo.Lazy, test_build's BUILT) keep the tests of one parameter together and
spread the parameters (TOGETHER's functions keep all their parameters on one worker). Modules in FIRST go out
first, longest first, so that no worker is left running a long one while the other idles at the end; the rest
follow in collection order."""

from __future__ import annotations

from typing import Literal

from xdist.scheduler import LoadScopeScheduling

SPLIT: dict[str, Literal["test", "param"]] = {
    "tests/acceptance/test_holdout.py": "test",
    "tests/calibration/test_fit.py": "test",
    "tests/calibration/test_framework_kernels.py": "param",
    "tests/calibration/test_table_floors.py": "param",
    "tests/cost/test_monotone.py": "param",
    "tests/report/test_build.py": "param",
}
# test functions whose parameters share a module-level build (one table set for every k): one unit of work each
TOGETHER = ("tests/cost/test_monotone.py::test_no_speedup_beyond_the_tokens_per_step_on_blackwell_fp8_tables",)
FIRST = ("tests/acceptance/test_holdout.py", "tests/cost/test_monotone.py", "tests/calibration/test_fit.py",
         "tests/calibration/test_framework_kernels.py", "tests/cli/test_readme.py", "tests/report/test_build.py",
         "tests/test_notebooks.py", "tests/test_readme_figures.py")


def scope(nodeid: str) -> str:
    """The unit of work a test belongs to: its file, its own id, or its file and parameter id (SPLIT)."""
    path = nodeid.split("::", 1)[0]
    together = next((t for t in TOGETHER if nodeid.startswith(f"{t}[")), None)
    if together:
        return together
    rule = SPLIT.get(path)
    if rule == "test":
        return nodeid
    if rule == "param" and nodeid.endswith("]") and "[" in nodeid:
        return f"{path}[{nodeid[nodeid.index('[') + 1:]}"
    return path


def rank(nodeid: str) -> int:
    """Where a test's module stands in the queue: FIRST's order, then the rest."""
    path = nodeid.split("::", 1)[0]
    return FIRST.index(path) if path in FIRST else len(FIRST)


class Scheduling(LoadScopeScheduling):
    """xdist's loadscope with `scope` for its units of work, taken in the workers' collection order (conftest.py
    puts FIRST's tests first there)."""

    def _split_scope(self, nodeid: str) -> str:
        return scope(nodeid)

    def schedule(self) -> None:
        self.config.option.loadscopereorder = False  # keep the order: FIRST, then collection order
        super().schedule()

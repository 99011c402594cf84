"""The notebooks run top to bottom (executed here so that they never rot) and are stored without outputs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
SECONDS: dict[str, float] = {}


def test_at_least_three_notebooks() -> None:
    assert len(NOTEBOOKS) >= 3


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_without_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: clear outputs before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_runs_top_to_bottom(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Executed in memory from an empty working folder (nothing read or written beside the notebook), with the
    smaller parameters a notebook takes under SPECSIM_NOTEBOOK_QUICK=1 (03 fits on a third of the rows; the full
    fit's accuracy is tests/calibration/test_fit.py's)."""
    monkeypatch.setenv("SPECSIM_NOTEBOOK_QUICK", "1")  # the kernel inherits it
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    t0 = time.perf_counter()
    client.execute()  # raises CellExecutionError on the first failing cell
    SECONDS[path.stem] = time.perf_counter() - t0
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    if "calibration" in path.stem and "absent: skipping" in text:
        assert not images  # no reference timings here: the notebook says so and does nothing else
    else:
        assert images, f"{path.name} drew no figure"
    if "calibration" in path.stem and "absent" not in text:
        assert "held-out models: MAPE" in text
    assert sum(SECONDS.values()) < 120, f"notebooks together took {sum(SECONDS.values()):.0f} s"


def test_calibration_notebook_skips_without_reference_timings(tmp_path: Path) -> None:
    """Where shared/reference/vidur is absent (a checkout on its own) the notebook still runs, and says why
    it did nothing."""
    path = next(p for p in NOTEBOOKS if "calibration" in p.stem)
    nb = nbformat.read(path, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code" and "def find_reference" in c.source)
    first.source = first.source.replace("VIDUR = find_reference()", "VIDUR = None  # as if absent")
    assert "VIDUR = None" in first.source
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
                   if o.output_type == "stream")
    assert "absent: skipping" in text and "skipped: no reference timings" in text
    assert not [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})]

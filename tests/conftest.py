from __future__ import annotations

from pathlib import Path

import pytest

VIDUR = Path(__file__).resolve().parents[1].parent / "shared" / "reference" / "vidur"


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

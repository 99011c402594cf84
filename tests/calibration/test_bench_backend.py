from __future__ import annotations

import sys
from pathlib import Path

import pytest

from specsim.calibration.bench_backend import Backend, import_torch
from specsim.errors import SpecsimError
from tests._cli import run


def test_buffer_rotation_covers_the_cache_within_budget() -> None:
    be = Backend(torch=None, device="cpu", warmup=0, repeats=1, flush_bytes=64e6, budget_bytes=100e6)
    assert be.n_sets(8e6) == 8  # 8 x 8 MB >= 64 MB: no repeat reads warm data
    assert be.n_sets(30e6) == 3  # 3 x 30 MB = 90 MB, the budget allows no more
    assert be.n_sets(500e6) == 1  # one set never exceeds the budget check: it is the measurement itself


def test_without_torch_one_clear_line_and_status_2(monkeypatch, tmp_path: Path, capsys) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    with pytest.raises(SpecsimError, match=r'pip install -e "\.\[bench\]"'):
        import_torch()
    code, _, err = run(capsys, "bench", "--device", "cpu", "--model", "qwen2.5-0.5b", "--quick",
                       "-o", str(tmp_path / "b.csv"))
    assert code == 2 and "needs the 'bench' extra" in err and "(torch)" in err and not (tmp_path / "b.csv").exists()

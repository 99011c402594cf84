"""Every command path that reads NVIDIA's tables, without the `tables` extra installed, ends in one line naming the
extra and the command that installs it, exit status 2, and writes nothing (issue 30: "calibrate-tables --score-only"
ended in "internal error: KeyError: 'rows'")."""

from __future__ import annotations

from pathlib import Path

import pytest

import specsim.cost.aiconfigurator as aic
import specsim.cost.aiconfigurator_files as files
import specsim.cost.measured_tables as mt
from specsim.calibration import tables
from specsim.errors import SpecsimError
from tests._cli import run

INSTALL = 'pip install -e ".[tables]"'


@pytest.fixture()
def no_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """aiconfigurator-core absent: its version unknown to the package metadata, and no tables built before."""
    monkeypatch.delenv("AICONFIGURATOR_DATA_ROOT", raising=False)
    for module in (files, aic):
        monkeypatch.setattr(module, "installed_version", lambda: None)
    monkeypatch.setattr(mt, "_TABLES", {})


def test_the_fit_and_its_rows_refuse_in_one_line(no_extra: None) -> None:
    with pytest.raises(SpecsimError, match=r"needs the 'tables' extra: pip install -e \".\[tables\]\""):
        tables.load_rows("h100-sxm", "vllm")
    with pytest.raises(SpecsimError, match="aiconfigurator-core"):
        aic.require_tables("x")


@pytest.mark.parametrize("args", [
    ("calibrate-tables", "-H", "h100-sxm", "--score-only"),
    ("calibrate-tables", "-H", "h100-sxm", "--score-only", "--family", "alltoall"),
    ("evaluate", "-H", "h100-sxm", "-m", "llama-3.1-8b", "-d", "eagle3", "--k", "3", "-e", "trtllm",
     "--cost-model", "table"),
    ("plan", "scenarios/chat-traffic-llama8b-h100.yaml", "--cost-model", "table"),
])
def test_commands_that_read_the_tables_say_which_extra(no_extra: None, capsys: pytest.CaptureFixture[str],
                                                       args: tuple[str, ...]) -> None:
    code, out, err = run(capsys, *args)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert INSTALL in err and "aiconfigurator-core" in err and "KeyError" not in err


def test_import_writes_nothing_without_the_extra(no_extra: None, capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path) -> None:
    target = tmp_path / "t.csv"
    code, out, err = run(capsys, "import", "aiconfigurator", "-o", str(target))
    assert code == 2 and out == "" and err.count("\n") == 1 and INSTALL in err and not target.exists()


def test_a_csv_of_measurements_needs_no_extra(no_extra: None, tmp_path: Path) -> None:
    """`--cost-model table` over the user's own measurement CSV reads no NVIDIA table."""
    import pandas as pd

    from specsim.cost.costmodel import cost_model, describe
    from specsim.cost.hardware import load_hardware

    csv = tmp_path / "m.csv"
    pd.DataFrame([{"op": "gemm", "device": "h100-sxm", "dtype": "bf16", "tokens": m, "d_in": 4096, "d_out": 4096,
                   "time_ms": 0.01 * m, "framework": "x", "kernel": "k"} for m in (1, 2, 4)]).to_csv(csv, index=False)
    hw = load_hardware("h100-sxm").with_cost_model("table", measurements=str(csv))
    assert cost_model(hw).tables.gemm_grid and describe(hw).startswith(f"table ({csv}")

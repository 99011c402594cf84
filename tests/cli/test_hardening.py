"""Issue #13 beyond the corpus: safe outputs (atomic sets, never a symlink, device or foreign folder),
one CLI vocabulary (formats, option names, --version, exit statuses 0/1/2/3), tables that fit the
terminal, scenario-relative paths, and the answers that must now be refusals."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
import yaml

from specsim.errors import SpecsimError
from specsim.files import REPORT_MARKER, Outputs, output_folder, read_mapping
from tests.corpus.harness import ROOT, invoke, snapshot

SCEN = ROOT / "scenarios"
EXAMPLES = ROOT / "examples"
FAST = str(SCEN / "llama8b-1b-draft-h100.yaml")


# --- outputs ---------------------------------------------------------------------------------------------

def test_dev_full_stays_a_device() -> None:
    r = invoke("predict", str(EXAMPLES / "measurements.csv"), "-o", "/dev/full")
    assert r.code == 2 and "not a regular file" in r.err
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_symlink_target_is_left_alone(tmp_path: Path) -> None:
    real = tmp_path / "real.csv"
    real.write_text("keep")
    (tmp_path / "link.csv").symlink_to(real)
    r = invoke("sweep", FAST, "-o", str(tmp_path / "link.csv"), "--batch", "1,8")
    assert r.code == 2 and "symbolic link" in r.err
    assert (tmp_path / "link.csv").is_symlink() and real.read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.csv", "real.csv"]


def test_existing_folder_as_output_leaves_no_tmp(tmp_path: Path) -> None:
    (tmp_path / "out.csv").mkdir()
    r = invoke("predict", str(EXAMPLES / "measurements.csv"), "-o", str(tmp_path / "out.csv"))
    assert r.code == 2 and "is a folder" in r.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]


def test_output_replaces_a_regular_file_in_one_rename(tmp_path: Path) -> None:
    out = tmp_path / "p.csv"
    out.write_text("old")
    r = invoke("predict", str(EXAMPLES / "measurements.csv"), "-o", str(out))
    assert r.code == 0, r.err
    assert out.read_text().startswith("op,") and "predicted_ms" in out.read_text().splitlines()[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.csv"]


def test_outputs_set_is_all_or_nothing(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), Outputs() as outs:
        outs.path(tmp_path / "a.csv").write_text("a")
        outs.path(tmp_path / "b.csv").write_text("b")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []
    with Outputs() as outs:
        outs.path(tmp_path / "a.csv").write_text("a")
        (outs.path(tmp_path / "b.csv").parent / "b.json").write_text("{}")  # a sidecar beside a staged file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "b.json"]


def test_outputs_refuse_a_symlink_that_appears_meanwhile(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    with pytest.raises(SpecsimError, match="symbolic link"), Outputs() as outs:
        outs.path(tmp_path / "x.csv").write_text("new")
        (tmp_path / "x.csv").symlink_to(victim)
    assert victim.read_text() == "keep" and (tmp_path / "x.csv").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["victim", "x.csv"]


def test_report_folder_is_marked_and_replaced_as_a_whole(tmp_path: Path) -> None:
    out = tmp_path / "rep"
    r = invoke("report", FAST, "-o", str(out))
    assert r.code == 0, r.err
    assert (out / REPORT_MARKER).is_file()
    (out / "notes.txt").write_text("mine")
    inode = out.stat().st_ino
    r = invoke("report", FAST, "-o", str(out), "--format", "json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["output"] == str(out)
    assert out.stat().st_ino != inode  # a new folder renamed into place, not files replaced one by one
    assert (out / "notes.txt").read_text() == "mine" and (out / REPORT_MARKER).is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]


def test_report_refuses_a_foreign_folder_before_any_work(tmp_path: Path) -> None:
    out = tmp_path / "thesis"
    out.mkdir()
    (out / "chapter1.tex").write_text("precious")
    r = invoke("report", FAST, "-o", str(out))
    assert r.code == 2 and "not an earlier specsim report" in r.err
    assert [p.name for p in out.iterdir()] == ["chapter1.tex"]


def test_output_folder_failure_keeps_the_old_one(tmp_path: Path) -> None:
    out = tmp_path / "rep"
    with output_folder(out, ("a.txt",)) as tmp:
        (tmp / "a.txt").write_text("first")
    with pytest.raises(RuntimeError), output_folder(out, ("a.txt",)) as tmp:
        (tmp / "a.txt").write_text("second")
        raise RuntimeError("fail")
    assert (out / "a.txt").read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]


def test_calibrate_writes_profile_and_plots_as_a_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specsim.calibration import plots

    def broken(*_a: object, **_k: object) -> list[Path]:
        raise SpecsimError("plotting failed (simulated)")

    args = ("calibrate", str(EXAMPLES / "measurements.csv"), "-H", "h100-sxm", "--ops", "gemm", "-o",
            str(tmp_path / "fit.yaml"))
    with monkeypatch.context() as m:
        m.setattr(plots, "calibration_plots", broken)
        r = invoke(*args)
    assert r.code == 2 and "plotting failed" in r.err
    assert list(tmp_path.iterdir()) == []  # no profile without its figures, no temporary folder
    r = invoke(*args)
    assert r.code == 0, r.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fit.yaml", "fit_error_vs_size.png",
                                                          "fit_predicted_vs_measured.png"]
    assert read_mapping(tmp_path / "fit.yaml")["name"]


# --- refusals that used to be answers ----------------------------------------------------------------------

def test_plan_of_a_model_that_does_not_fit_says_so(tmp_path: Path) -> None:
    s = tmp_path / "s.yaml"
    s.write_text(yaml.safe_dump({"hardware": "h100-sxm", "model": "llama-3.1-70b", "drafts": ["eagle3"],
                                 "load": {"buckets": [{"batch": 8, "context": 2048}]}}))
    r = invoke("plan", str(s))
    assert r.code == 2 and "does not fit: " in r.err and "GiB needed of" in r.err
    assert "speculate" not in r.err.lower()


def test_arrival_rate_where_nothing_fits(tmp_path: Path) -> None:
    s = tmp_path / "s.yaml"
    s.write_text(yaml.safe_dump({"hardware": "h100-sxm", "model": "llama-3.1-8b", "drafts": ["eagle3"],
                                 "load": {"arrival_rate_rps": 40, "prompt_tokens": 100000, "output_tokens": 8000}}))
    r = invoke("plan", str(s))
    assert r.code == 2 and r.err.count("\n") == 1 and "s.yaml" in r.err


def test_evaluate_never_reports_a_speedup_that_does_not_fit() -> None:
    for extra in (["--batch", "1000000"], ["--batch", "64", "--context", "128K"]):
        r = invoke("evaluate", "-H", "h100-sxm", "-m", "llama-3.1-8b", "--draft", "eagle3", "--k", "4", *extra)
        assert r.code == 2 and r.err.startswith("error: does not fit: ") and "GiB needed of" in r.err
        assert "speedup" not in r.out


def test_predict_refuses_bad_times(tmp_path: Path) -> None:
    for value in ("nan", "-1", "0", "inf"):
        f = tmp_path / "m.csv"
        f.write_text(f"op,device,tokens,d_in,d_out,time_ms\ngemm,h100-sxm,1,4096,4096,{value}\n")
        r = invoke("predict", str(f), "-o", str(tmp_path / "p.csv"))
        assert r.code == 2 and "time_ms" in r.err and "inf%" not in r.out, value
    assert not (tmp_path / "p.csv").exists()


# --- one vocabulary ----------------------------------------------------------------------------------------

def test_version() -> None:
    from specsim import __version__

    r = invoke("--version")
    assert r.code == 0 and r.out.strip() == f"specsim {__version__}"


CHEAP = [["hardware", "list"], ["hardware", "show", "h100-sxm"], ["models", "list"], ["models", "show", "phi-2"],
         ["ops", "-H", "h100-sxm", "-m", "llama-3.1-8b", "--tokens", "1,8"],
         ["forward", "-H", "h100-sxm", "-m", "llama-3.1-8b", "--tokens", "1,8"], ["plan", FAST],
         ["evaluate", "-c", "0.05", "--alpha", "0.7", "--k", "3"],
         ["evaluate", "-H", "h100-sxm", "-m", "llama-3.1-8b", "--draft", "eagle3", "--k", "3"],
         ["beta", "--p", "0.5,0.5", "--q", "0.6,0.4"]]


@pytest.mark.parametrize("fmt", ["table", "csv", "json", "markdown"])
@pytest.mark.parametrize("cmd", CHEAP, ids=lambda c: "-".join(c[:2]))
def test_every_command_takes_every_format(cmd: list[str], fmt: str) -> None:
    r = invoke(*cmd, "--format", fmt)
    assert r.code == 0, r.err
    if fmt == "json":
        json.loads(r.out)
    elif fmt == "markdown":
        assert "|---" in r.out or r.out.startswith("#") or "---:|" in r.out
    elif fmt == "csv":
        assert "," in r.out.splitlines()[0]


@pytest.mark.parametrize("fmt", ["csv", "json", "markdown"])
def test_writers_report_in_every_format(fmt: str, tmp_path: Path) -> None:
    for cmd in (["predict", str(EXAMPLES / "measurements.csv"), "-o", str(tmp_path / "p.csv")],
                ["sweep", FAST, "-o", str(tmp_path / "s.csv"), "--batch", "1,8", "--context", "1024"]):
        r = invoke(*cmd, "--format", fmt)
        assert r.code == 0, r.err
        assert str(tmp_path) in r.out


def test_old_option_names_still_work_hidden(tmp_path: Path) -> None:
    a = invoke("ops", "-H", "h100-sxm", "-m", "llama-3.1-8b", "--tokens", "1", "--dtype", "fp8", "-f", "json")
    b = invoke("ops", "-H", "h100-sxm", "-m", "llama-3.1-8b", "--tokens", "1", "--weight-dtype", "fp8", "-f", "json")
    assert a.code == b.code == 0 and a.out == b.out
    r = invoke("sweep", FAST, "-o", str(tmp_path / "s.csv"), "--batches", "1,8", "--contexts", "1024",
               "--alpha-grid", "0.6,0.8")
    assert r.code == 0, r.err
    help_text = invoke("ops", "--help").out
    assert "--weight-dtype" in help_text and "--dtype " not in help_text


def test_bench_spells_its_dtype_compute_dtype() -> None:
    help_text = invoke("bench", "--help").out
    assert "--compute-dtype" in help_text and "--dtype " not in help_text


def test_validate_failure_is_exit_1(monkeypatch: pytest.MonkeyPatch) -> None:
    from specsim.acceptance import check

    rows = check.run_validation(seed=0, n_steps=200, n_runs=200)
    bad = [type(rows[0])(**{**rows[0].__dict__, "passed": False}), *rows[1:]]
    monkeypatch.setattr(check, "run_validation", lambda **_k: bad)
    r = invoke("validate", "--samples", "200", "--format", "json")
    assert r.code == 1 and json.loads(r.out)["failed"] == 1


def test_internal_error_is_one_line_and_exit_3(monkeypatch: pytest.MonkeyPatch) -> None:
    from specsim.cli import costs

    def crash(*_a: object, **_k: object) -> None:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(costs, "breakdown", crash)
    args = ("forward", "-H", "h100-sxm", "-m", "llama-3.1-8b")
    r = invoke(*args)
    assert r.code == 3 and r.err.count("\n") == 1
    assert r.err.startswith("internal error: ZeroDivisionError: a bug — please report this at ")
    assert "Traceback" not in r.err
    monkeypatch.setenv("SPECSIM_DEBUG", "1")
    r = invoke(*args)
    assert r.code == 3 and "Traceback" in r.err


def test_usage_error_is_one_line_exit_2() -> None:
    r = invoke("ops", "-H", "h100-sxm", "-m", "llama-3.1-8b", "--batch", "many")
    assert r.code == 2 and r.err.count("\n") == 1 and "--batch" in r.err


@pytest.mark.parametrize("width", [60, 80, 100, 200])
def test_tables_fit_the_terminal(width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every line within the terminal and nothing cut (no ellipsis): tables change layout, engine configs
    are indented YAML blocks."""
    monkeypatch.setenv("COLUMNS", str(width))
    for cmd in (["plan", FAST], ["forward", "-H", "h100-sxm", "-m", "llama-3.1-8b", "--tokens", "1,8"],
                ["models", "list"], ["hardware", "list"], ["engines", "list"],
                ["evaluate", "-H", "h100-sxm", "-m", "llama-3.1-8b", "-d", "eagle3", "--k", "3", "--batch", "16"]):
        r = invoke(*cmd)
        assert r.code == 0, r.err
        lines = r.out.splitlines()
        assert lines and max(len(line) for line in lines) <= width, (cmd, max(lines, key=len))
        assert "…" not in r.out, cmd


# --- scenario-relative paths -----------------------------------------------------------------------------------

def test_scenario_paths_are_relative_to_the_scenario(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specsim.cost.hardware import profiles_dir
    from specsim.cost.model import catalogue_dir

    proj = tmp_path / "proj"
    (proj / "hw").mkdir(parents=True)
    (proj / "models" / "mine").mkdir(parents=True)
    (proj / "plans").mkdir()
    shutil.copy(profiles_dir() / "h100-sxm.yaml", proj / "hw" / "my-gpu.yaml")
    shutil.copy(catalogue_dir() / "llama-3.1-8b.json", proj / "models" / "mine" / "config.json")
    shutil.copy(EXAMPLES / "vllm_metrics.txt", proj / "plans" / "scrape.txt")
    (proj / "plans" / "s.yaml").write_text(yaml.safe_dump({
        "hardware": "../hw/my-gpu.yaml", "model": "../models/mine/config.json",
        "drafts": [{"method": "eagle3", "acceptance": {"file": "scrape.txt"}}],
        "load": {"buckets": [{"batch": 8, "context": 2048}]}}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    before = snapshot(tmp_path)
    r = invoke("plan", str(proj / "plans" / "s.yaml"), "--format", "json", cwd=elsewhere)
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["model"] == "mine"
    assert snapshot(tmp_path) == before


def test_validate_published_at_80_columns_splits_no_word(monkeypatch: pytest.MonkeyPatch) -> None:
    """The crossover table's long sweep names wrap between words, never inside one (rich folded them at 9
    characters when the wide headers left the sweep column no room)."""
    import json

    monkeypatch.setenv("COLUMNS", "80")
    r = invoke("validate", "--published")
    assert r.code == 0, r.err
    assert max(len(line) for line in r.out.splitlines()) <= 80 and "…" not in r.out
    data = json.loads(invoke("validate", "--published", "-f", "json").out)
    words = {w for c in data["crossovers"] for w in c["sweep"].split()}
    assert words and all(w in r.out for w in words)

"""The report's section on a fitted deployment: there exactly when the scenario stands on one, naming its
calibration and every run it was fitted to, with the runs drawn over the curves the fit predicts."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import yaml

from specsim.report.sections.deployment import deployment_section
from specsim.scenario.scenario import parse_scenario

DEP = Path(__file__).resolve().parents[1] / "data" / "deployment_llama8b_h100.yaml"
LOAD = {"buckets": [{"batch": 8, "context": 2048}]}


def _ctx(data: dict[str, object]) -> SimpleNamespace:
    return SimpleNamespace(s=parse_scenario(data, "x.yaml"), title="t")


def test_no_deployment_no_section() -> None:
    c = _ctx({"hardware": "h100-sxm", "model": "llama-3.1-8b", "drafts": ["eagle3"], "load": LOAD})
    assert deployment_section(c) is None  # type: ignore[arg-type]


def test_the_section_names_the_calibration_and_each_run(tmp_path: Path) -> None:
    m = yaml.safe_load(DEP.read_text())
    m["residuals"] = [
        {"run": f"{arm}{c}", "arm": arm, "load": f"concurrency {c}", "concurrency": c, "num_prompts": 4 * c,
         "output_tok_s": tok,
         "fitted_output_tok_s": tok * 1.01, "tpot_mean_ms": tpot, "fitted_tpot_mean_ms": tpot * 0.99}
        for arm, c, tok, tpot in (("off", 1, 110.0, 8.9), ("off", 16, 1500.0, 10.2), ("on", 1, 260.0, 3.7),
                                  ("on", 16, 3000.0, 5.1))]
    path = tmp_path / "dep.yaml"
    path.write_text(yaml.safe_dump(m))
    c = _ctx({"model": "llama-3.1-8b", "drafts": ["eagle3"], "load": LOAD, "deployment": str(path),
              "hardware": "h100-sxm"})
    assert c.s.calibration is not None and c.s.calibration.pass_scale == 1.15
    sec = deployment_section(c)  # type: ignore[arg-type]
    assert sec is not None and sec.figure is not None
    assert "host +0.6 ms, decode passes x1.15, speculative step +0.3 ms, verification x0.9" in sec.body
    assert all(f"| {arm}{load} |" in sec.body for arm in ("off", "on") for load in (1, 16))
    ax = sec.figure.axes[0]
    curves = [line for line in ax.lines if line.get_linestyle() == "-"]
    points = [line for line in ax.lines if line.get_marker() == "o"]
    assert len(curves) == 2 and len(points) == 2
    # each arm's curve runs through the runs' own loads and past them (half the lowest to twice the highest)
    assert all(len(line.get_xdata()) >= 9 for line in curves)

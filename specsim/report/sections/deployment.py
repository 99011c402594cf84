"""The fitted deployment a report stands on (`--deployment`, a scenario's `deployment:`): what its runs fitted,
each run against its fit, and the frontier the fit implies with the measured runs over it."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

from specsim.report.context import Ctx, Section, md_table
from specsim.scenario.deployment import Deployment, load_deployment

POINTS = 9  # loads on the predicted curve, geometric over the runs' range


def scenario_deployment(c: Ctx) -> Deployment | None:
    """The deployment the scenario names (relative to the scenario's folder, as it was read), or None."""
    ref = c.s.raw.get("deployment")
    if ref is None:
        return None
    path = Path(str(ref))
    return load_deployment(path if path.is_absolute() or path.exists() else Path(c.s.path).parent / path)


def _loads(d: Deployment) -> tuple[str, list[float]]:
    """('concurrency' | 'rate', the runs' loads)."""
    kinds = {str(r.get("load", "")).split(" ")[0] for r in d.residuals} & {"concurrency", "rate"}
    values = sorted({v for v in _load_values(d) if v})
    return (kinds.pop() if len(kinds) == 1 else "concurrency"), values


def _load_values(d: Deployment) -> list[float]:
    """Each run's load as a number (0 where the file does not say)."""
    found = [re.match(r"(?:concurrency|rate) ([\d.]+)", str(r.get("load", ""))) for r in d.residuals]
    return [float(m.group(1)) if m else 0.0 for m in found]


def _curves(d: Deployment) -> dict[str, np.ndarray]:
    """The predicted (tok/s, TPOT ms) per arm over the runs' range of loads (advise/fit_runs.simulate_points)."""
    from specsim.advise.fit_runs import Point, flags_of, simulate_points

    kind, loads = _loads(d)
    if not loads:
        return {}
    q, flags = d.question, flags_of(d)
    span = np.geomspace(max(loads[0] / 2, 0.25 if kind == "rate" else 1.0), loads[-1] * 2, POINTS)
    grid = np.unique(np.concatenate([span if kind == "rate" else np.round(span), loads]))  # through the runs' own
    inp, out = int(q.get("input_len", 1024)), int(q.get("output_len", 1024))
    # as many prompts per unit of load as the runs sent (a short run's ramp is part of what it measured)
    per = [float(r["num_prompts"]) / v for r, v in zip(d.residuals, _load_values(d), strict=True)
           if r.get("num_prompts") and v]
    size = float(np.median(per)) if per else None
    pts = [Point(arm, None if kind == "rate" else int(x), inp, out, 1.0, 1.0,
                 None if size is None else max(1, round(size * x)), "", x if kind == "rate" else None)
           for arm in d.arms for x in grid]
    a = np.cumprod(np.asarray(d.alphas[:int(q.get("k") or 1)], float))
    pred = simulate_points(flags, d.calibration, float(1.0 + a.sum()) if len(a) else None, pts)
    return {arm: pred[[p.arm == arm for p in pts], :2] for arm in d.arms}


def deployment_section(c: Ctx) -> Section | None:
    """None where the scenario stands on no fitted deployment."""
    d = scenario_deployment(c)
    if d is None:
        return None
    from specsim.report.figures.deployment import deployment_runs

    cal = d.calibration
    params = [[name, f"{v['value']:.4g}", (f"± {v['sd']:.2g}" if "sd" in v else f"± {v['sd_log']:.1%}")]
              for name, v in d.parameters.items() if "value" in v]
    runs = [[r.get("run", ""), r.get("arm", ""), r.get("load", ""), f"{r['output_tok_s']:,.1f}",
             f"{r['fitted_output_tok_s']:,.1f}", f"{r['tpot_mean_ms']:.2f}", f"{r['fitted_tpot_mean_ms']:.2f}"]
            for r in d.residuals]
    body = (f"Every figure in this report is priced on the deployment fitted to its own benchmark runs "
            f"(`{Path(d.path).name}`, `specsim fit-runs`): {cal.label}; acceptance "
            f"{d.acceptance_source or 'from the prior'}; a predicted serving figure's 80% band is "
            f"±{math.expm1(1.2816 * d.sigma_log):.0%}.\n\n"
            + md_table(["parameter", "fitted", "1 sd"], params) + "\n\n"
            + md_table(["run", "arm", "load", "tok/s", "fitted", "TPOT ms", "fitted"], runs))
    measured = {arm: np.array([[r["output_tok_s"], r["tpot_mean_ms"]] for r in d.residuals if r.get("arm") == arm])
                for arm in d.arms}
    fig = deployment_runs(_curves(d), measured, d.sigma_log, f"{c.title}: the fitted deployment's runs over the "
                          "frontier it predicts")
    return Section("Your deployment: the runs it was fitted to", body, fig, "deployment",
                   "measured runs (points) over the predicted throughput-latency curve of each arm, with its 80% band")

"""The fitted deployment a report stands on (`--deployment`, a scenario's `deployment:`): what its runs fitted,
each run against its fit, and the frontier the fit implies with the measured runs over it."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from specsim.report.context import Ctx, Section, md_table
from specsim.scenario.deployment import Deployment, load_deployment, resolve

POINTS = 9  # loads on the predicted curve, geometric over the runs' range


def scenario_deployment(c: Ctx) -> Deployment | None:
    """The deployment the scenario names (read as the scenario read it), or None."""
    ref = c.s.raw.get("deployment")
    return None if ref is None else load_deployment(resolve(ref, Path(c.s.path).parent))


def _curves(d: Deployment) -> dict[str, np.ndarray]:
    """The predicted (tok/s, TPOT ms) per arm over the runs' range of loads, through the runs' own
    (advise/fit_runs.simulate_points), as many prompts per unit of load as the runs sent (a short run's ramp is
    part of what it measured)."""
    from specsim.advise.fit_runs import Point, flags_of, run_points, simulate_points

    runs = run_points(d)
    rate = any(p.rate_rps is not None for p in runs)

    def load(p: Point) -> float:
        return float((p.rate_rps if rate else p.concurrency) or 0)

    loads = sorted({load(p) for p in runs} - {0.0})
    if not loads:
        return {}
    span = np.geomspace(max(loads[0] / 2, 0.25 if rate else 1.0), loads[-1] * 2, POINTS)
    grid = np.unique(np.concatenate([span if rate else np.round(span), loads]))
    per = [p.num_prompts / load(p) for p in runs if p.num_prompts and load(p)]
    size = float(np.median(per)) if per else None
    inp, out = int(d.question.get("input_len", 1024)), int(d.question.get("output_len", 1024))
    pts = [Point(arm, None if rate else int(x), inp, out, 1.0, 1.0, None if size is None else max(1, round(size * x)),
                 "", float(x) if rate else None) for arm in d.arms for x in grid]
    pred = simulate_points(flags_of(d), d.calibration, d.tokens_per_step(), pts)
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

"""Assembling a report: every section in order (with a progress tick for each), then one Markdown
document (the header with the recommendation first, a contents line, the sections and a footer)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from specsim.report.context import Ctx, Progress, Section, make_ctx
from specsim.report.fleet import fleet
from specsim.report.sections.capacity import capacity_section
from specsim.report.sections.deployment import deployment_section
from specsim.report.sections.heatmap import heatmap_section
from specsim.report.sections.memory import memory_section
from specsim.report.sections.plan import header, plan_section
from specsim.report.sections.policy import policy_section, rate_model
from specsim.report.sections.provenance import provenance_section
from specsim.report.sections.sensitivity import Sensitivity, sensitivity_section
from specsim.report.sections.speedup import speedup_section
from specsim.report.sections.verification import verification_section
from specsim.scenario.scenario import Scenario

if TYPE_CHECKING:  # the serving section (the simulator, pandas) loads only for a scenario with traffic
    from specsim.report.sections.serving import ServingRuns

STEPS = ("plan", "verification cost", "speedup by draft and k", "optimal k heat map", "policy over the load",
         "sensitivity", "memory", "capacity and cost", "serving simulation", "provenance", "writing")


def build_sections(s: Scenario, reference: Path | None = None, progress: Progress | None = None
                   ) -> tuple[Ctx, list[Section]]:
    """The report's context and its sections, in order; ``progress(step)`` is called before each step."""
    tick = progress or (lambda _step: None)
    tick(STEPS[0])
    # Sensitivity's re-plans run in forked workers beside the plan and the other sections: one worker when the
    # plan itself simulates (objective slo: seconds of work for this process, so one CPU is left), else all.
    simulates = s.objective == "slo" and s.serving is not None and s.serving.slo is not None and (
        s.traffic is not None or s.arrival is not None)
    sens = Sensitivity(s).start(1 if simulates else None)
    runs: ServingRuns | None = None
    try:
        try:
            c = make_ctx(s)
            # The serving section's simulations (on the plan's policy) start now in forked workers, beside the
            # other sections.
            if s.traffic is not None:
                from specsim.report.sections.serving import start_serving

                runs = start_serving(c)
            rm = rate_model(c) if s.arrival is not None else None
            sections = [plan_section(c)]
            fitted = deployment_section(c)  # the deployment's runs, where the scenario stands on one
            if fitted is not None:
                sections.append(fitted)
            for step, fn in ((STEPS[1], verification_section), (STEPS[2], speedup_section),
                             (STEPS[3], heatmap_section)):
                tick(step)
                sec = fn(c)
                if sec is not None:
                    sections.append(sec)
            tick(STEPS[4])
            sections.append(policy_section(c, rm))
            tick(STEPS[5])
            sections.append(sensitivity_section(c, sens))
        finally:
            sens.close()
        tick(STEPS[6])
        sections.append(memory_section(c))
        tick(STEPS[7])
        fl = fleet(c, rm.slo_ms if rm else None, rm.curves if rm else None)
        sections.append(capacity_section(c, rm, fl))
        tick(STEPS[8])
        serving = None
        if s.traffic is not None:  # else no serving section
            from specsim.report.sections.serving import serving_section

            serving = serving_section(c, runs)
    finally:
        if runs is not None and runs.batch is not None:
            runs.batch.close()
    if serving is not None:
        from specsim.report.sections.serving import frontier_section

        sections.append(serving)
        front = frontier_section(c, runs)
        if front is not None:
            sections.append(front)
    if s.traffic is not None:
        from specsim.report.sections.agentic import agentic_section
        from specsim.report.sections.pools import pools_section

        sections += [sec for sec in (agentic_section(c), pools_section(c)) if sec is not None]
    tick(STEPS[9])
    sections.append(provenance_section(c, reference))
    return c, sections


def render_markdown(c: Ctx, sections: list[Section]) -> str:
    """The whole report as Markdown; figures are referenced as figures/NAME.png."""
    out = [header(c)]
    figs = [sec for sec in sections if sec.figure is not None]
    if figs:
        out += ["Contents: " + " · ".join(sec.title for sec in sections), ""]
    for sec in sections:
        out += [f"## {sec.title}", "", sec.body.rstrip(), ""]
        if sec.figure is not None:
            out += [f"![{sec.caption}](figures/{sec.figure_name}.png)", ""]
        if sec.after:
            out += [sec.after.rstrip(), ""]
    out += ["---", "", f"Generated by `specsim report {Path(c.s.path).name}`; the plan's numbers are those of "
            f"`specsim plan {Path(c.s.path).name} --format json` (plan.json).", ""]
    return "\n".join(out)

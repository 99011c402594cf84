"""A scenario's plan: the analytic optimiser, then, for `objective: slo` with `serving.slo` and traffic (or
an arrival rate) to simulate, the draft, policy and replicas chosen by simulation against the SLO's
percentiles (advise/slo.py); the engine configs follow that choice."""

from __future__ import annotations

from specsim.plan.optimize import plan
from specsim.plan.result import Plan
from specsim.scenario.scenario import Scenario


def plan_scenario(s: Scenario) -> Plan:
    """The plan `specsim plan` prints and a report shows."""
    p = plan(s)
    if s.objective == "slo" and s.serving is not None and s.serving.slo is not None and (
            s.traffic is not None or s.arrival is not None):
        from specsim.advise.slo import optimise_slo  # the simulator (and pandas) only where it decides

        p = optimise_slo(p.scenario, p)  # the scenario as the plan searched it (plan/deploy.py)
    return p

"""Serving simulation: traffic, continuous batching with chunked prefill, KV and preemption, speculation policy.

Modules, one job each: traffic (arrivals, lengths, requests), traces (trace readers), acceptance
(workload mix, accepted-token sampling), policy (k by batch), cost (StepCost, StepTable, AnalyticCost),
engine (the event loop), metrics (percentiles, goodput, time series, price), capacity (on/off comparison,
replicas), sweep (joblib), config (the scenario file's traffic/serving sections).

On the planner (imported from their modules, not here: they sit above `specsim.plan`): planner
(`PlannerCost`: the planner's step_arrays as a StepCost; KV capacity from plan/memory.py; the workload mix's
acceptance from the drafts' priors), run (a scenario's simulation: `make_setup`, `run_scenario`,
`sweep_scenario`; what `specsim simulate` runs), slo (the SLO objective by simulation: draft, policy and
replicas, called by `plan.optimize.plan` for `objective: slo` with `serving.slo`).
"""

from importlib import import_module
from typing import Any

# The names below load their module on first use (PEP 562), so that reading a scenario file
# (simulate.config) does not import the simulator, its traces and pandas: the planner starts faster.
# The sweep function is `specsim.simulate.sweep.sweep` (a lazy name cannot share its module's name).
_WHERE = {
    "AcceptanceMix": "acceptance",
    "AnalyticCost": "cost",
    "Comparison": "capacity",
    "Empirical": "traffic",
    "EngineConfig": "engine",
    "Fixed": "traffic",
    "Gamma": "traffic",
    "Lognormal": "traffic",
    "Percentiles": "metrics",
    "Poisson": "traffic",
    "Pricing": "metrics",
    "RateCurve": "traffic",
    "ReplicaPlan": "capacity",
    "Requests": "traffic",
    "SLO": "metrics",
    "ServingMetrics": "metrics",
    "ServingSpec": "config",
    "SimResult": "engine",
    "SimulationSpec": "config",
    "SpecPolicy": "policy",
    "StepCost": "cost",
    "StepLog": "engine",
    "StepTable": "cost",
    "SweepCase": "sweep",
    "TimeSeries": "metrics",
    "Trace": "traces",
    "TraceArrivals": "traffic",
    "Traffic": "traffic",
    "TrafficSpec": "config",
    "Workload": "acceptance",
    "WorkloadClass": "acceptance",
    "compare_speculation": "capacity",
    "generate_requests": "traffic",
    "grid": "sweep",
    "load_simulation": "config",
    "read_trace": "traces",
    "replicas_needed": "capacity",
    "sample_accepted": "acceptance",
    "simulate": "engine",
    "summarize": "metrics",
}

__all__ = [
    "SLO", "AcceptanceMix", "AnalyticCost", "Comparison", "Empirical", "EngineConfig", "Fixed", "Gamma",
    "Lognormal", "Percentiles", "Poisson", "Pricing", "RateCurve", "ReplicaPlan", "Requests", "ServingMetrics",
    "ServingSpec", "SimResult", "SimulationSpec", "SpecPolicy", "StepCost", "StepLog", "StepTable", "SweepCase",
    "TimeSeries", "Trace", "TraceArrivals", "Traffic", "TrafficSpec", "Workload", "WorkloadClass",
    "compare_speculation", "generate_requests", "grid", "load_simulation", "read_trace", "replicas_needed",
    "sample_accepted", "simulate", "summarize",
]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(import_module(f"specsim.simulate.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'specsim.simulate' has no attribute {name!r}")

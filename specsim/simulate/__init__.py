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

from specsim.simulate.acceptance import AcceptanceMix, Workload, WorkloadClass, sample_accepted
from specsim.simulate.capacity import Comparison, ReplicaPlan, compare_speculation, replicas_needed
from specsim.simulate.config import ServingSpec, SimulationSpec, TrafficSpec, load_simulation
from specsim.simulate.cost import AnalyticCost, StepCost, StepTable
from specsim.simulate.engine import EngineConfig, SimResult, StepLog, simulate
from specsim.simulate.metrics import SLO, Percentiles, Pricing, ServingMetrics, TimeSeries, summarize
from specsim.simulate.policy import SpecPolicy
from specsim.simulate.sweep import SweepCase, grid, sweep
from specsim.simulate.traces import Trace, read_trace
from specsim.simulate.traffic import (
    Empirical,
    Fixed,
    Gamma,
    Lognormal,
    Poisson,
    RateCurve,
    Requests,
    TraceArrivals,
    Traffic,
    generate_requests,
)

__all__ = [
    "SLO", "AcceptanceMix", "AnalyticCost", "Comparison", "Empirical", "EngineConfig", "Fixed", "Gamma",
    "Lognormal", "Percentiles", "Poisson", "Pricing", "RateCurve", "ReplicaPlan", "Requests", "ServingMetrics",
    "ServingSpec", "SimResult", "SimulationSpec", "SpecPolicy", "StepCost", "StepLog", "StepTable", "SweepCase",
    "TimeSeries", "Trace", "TraceArrivals", "Traffic", "TrafficSpec", "Workload", "WorkloadClass",
    "compare_speculation", "generate_requests", "grid", "load_simulation", "read_trace", "replicas_needed",
    "sample_accepted", "simulate", "summarize", "sweep",
]

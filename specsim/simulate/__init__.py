"""Serving simulation: continuous batching with chunked prefill, KV and preemption, a speculation policy.

Modules, one job each: engine (the event loop), state (what one run holds and updates), stretch (its fast
path), trees (a draft tree as the loop runs it), cost (StepCost, StepTable, AnalyticCost), metrics
(percentiles, goodput, time series, price), client (a benchmark client's figures and names), frontier (a load
sweep read as the throughput frontier), capacity (on/off comparison, replicas), sweep (joblib).
Its inputs are the scenario's typed values (specsim.scenario: traffic, workload mix, serving) and a
policy (specsim.step.policy); what runs a scenario's simulation against the planner lives in specsim.advise.
"""

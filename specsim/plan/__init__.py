"""Scenarios, step economics, the optimiser, sweeps, capacity and engine configuration output."""

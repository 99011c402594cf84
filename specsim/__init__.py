"""specsim: should you speculate, and how? An analytic simulator and planner for speculative decoding."""

__version__ = "0.1.0"

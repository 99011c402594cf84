"""The throughput-interactivity frontier of a load sweep, where speculation stops paying, and what to run where.

A sweep (closed-loop concurrencies, or rates) gives one row per (configuration, load point) in the clients' names
(simulate/client.py). Read per configuration, output throughput per GPU against interactivity (tokens/s per user)
is the curve InferenceMAX and NVIDIA's and AMD's performance pages draw, one per configuration: speculation moves
the curve up and right at low load and stops paying where it meets plain decoding's.

- ratio: a configuration's output throughput (and TPOT) over plain decoding's at the same load point.
- crossover: the smallest swept load from which the ratio stays below 1 at every larger point (speculation
  stops paying there); None where it still pays at the largest point; the smallest point where it never pays.
- recommendation: per load point the configuration with the most output throughput (at a fixed concurrency
  throughput and per-user speed rise together), plain decoding unless one beats it by more than `margin`;
  consecutive points with the same choice form one range.

A configuration that completed no request at a load point (each one rejected: longer than its KV cache) made
no tokens there: its ratio is 0. Where plain decoding completed nothing the ratio is unknown (NaN): the
crossover and the recommendation read the points that have one, and the caller says which points completed
nothing (`advise.benchmark.frontier`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from specsim.errors import SpecsimError

OFF = "off"
LOADS = ("concurrency", "rate_rps")


def load_column(frame: pd.DataFrame) -> str:
    """The sweep's load axis: concurrency (closed loop) or rate_rps."""
    for name in LOADS:
        if name in frame.columns:
            return name
    raise SpecsimError("a frontier needs a sweep over concurrency or rate_rps")


def configuration(draft: str, policy: str) -> str:
    """A configuration's label: 'off', or the draft and its policy (e.g. 'eagle3 k=3')."""
    return OFF if policy == OFF else f"{draft} {policy}"


def ratios(frame: pd.DataFrame) -> pd.DataFrame:
    """Per speculating configuration and load point: output throughput and TPOT (mean) over plain decoding's at
    the same point (columns configuration, load, throughput_ratio, tpot_ratio)."""
    load = load_column(frame)
    off = frame[frame["configuration"] == OFF].set_index(load)
    if off.empty:
        raise SpecsimError("the sweep has no plain-decoding rows ('off') to compare with")
    on = frame[frame["configuration"] != OFF]
    base = off.reindex(on[load].to_numpy())
    out = pd.DataFrame({"configuration": on["configuration"].to_numpy(), load: on[load].to_numpy(),
                        # a configuration that completed nothing produced no tokens: 0 x plain decoding's
                        "throughput_ratio": np.nan_to_num(on["output_tok_s"].to_numpy(dtype=np.float64), nan=0.0)
                        / base["output_tok_s"].to_numpy(dtype=np.float64),
                        "tpot_ratio": on["tpot_mean_ms"].to_numpy() / base["tpot_mean_ms"].to_numpy()})
    return out.sort_values(["configuration", load], kind="stable").reset_index(drop=True)


def crossover(loads: np.ndarray, ratio: np.ndarray) -> float | None:
    """The smallest load from which `ratio` < 1 at every larger load (module docstring); None: it pays at the
    largest load. Loads need not be sorted."""
    known = np.isfinite(np.asarray(ratio, dtype=np.float64))  # a point that completed nothing has no ratio
    if not known.any():
        return None
    order = np.argsort(np.asarray(loads)[known], kind="stable")
    x = np.asarray(loads, dtype=np.float64)[known][order]
    r = np.asarray(ratio, dtype=np.float64)[known][order]
    pays = r >= 1.0
    if pays[-1]:
        return None
    last_pay = np.flatnonzero(pays)
    return float(x[last_pay[-1] + 1]) if last_pay.size else float(x[0])


def crossovers(frame: pd.DataFrame) -> dict[str, float | None]:
    """`crossover` of each speculating configuration's throughput ratio."""
    r = ratios(frame)
    load = load_column(frame)
    return {str(c): crossover(g[load].to_numpy(), g["throughput_ratio"].to_numpy())
            for c, g in r.groupby("configuration", sort=False)}


@dataclass(frozen=True)
class Choice:
    """What to run from one load point to the next: `configuration` over loads load_from..load_to (the swept points
    it covers), at `gain` x plain decoding's output throughput (the smallest over the range)."""

    load_from: float
    load_to: float
    configuration: str
    gain: float


def recommend(frame: pd.DataFrame, margin: float = 0.01) -> list[Choice]:
    """The best configuration per load point, as ranges (module docstring)."""
    if not 0 <= margin < 1:
        raise SpecsimError(f"margin must be in [0, 1), got {margin:g}")
    load = load_column(frame)
    r = ratios(frame)
    choices: list[Choice] = []
    for x in sorted(frame[load].unique()):
        at = r[(r[load] == x) & np.isfinite(r["throughput_ratio"])]  # without the configurations that completed nothing
        best = at.loc[at["throughput_ratio"].idxmax()] if not at.empty else None
        pick, gain = ((str(best["configuration"]), float(best["throughput_ratio"]))
                      if best is not None and best["throughput_ratio"] > 1.0 + margin else (OFF, 1.0))
        if choices and choices[-1].configuration == pick:
            last = choices[-1]
            choices[-1] = Choice(last.load_from, float(x), pick, min(last.gain, gain))
        else:
            choices.append(Choice(float(x), float(x), pick, gain))
    return choices

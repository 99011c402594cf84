"""The planner's error against published results, per source group.

Two acceptance modes, so the cost side and the acceptance side are judged apart:
  * measured — the source's own mean accepted length (tau) is given to the planner: only the step's
    cost is judged (rows that report tau);
  * priors  — nothing is given: the planner's acceptance priors decide (every priceable row).
The error of a row is predicted / published speedup - 1. Groups report n, median |error|, median
bias, the share within 10% and 25%, and, where the source gives plain decoding's tokens/s at batch 1,
its error. Batch sweeps report the first batch at which the published and the predicted speedups fall
below 1; the prediction there is anchored (acceptance fitted so that the sweep's lowest batch matches
the source: the sweep's shape is then the cost model's alone) and from priors.
Groups whose data fitted an engine parameter are marked "fit" (in-sample, data/fits.yaml); the others
"check".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from specsim.advise.grid import evaluate_grid
from specsim.advise.request import PRIOR_KEYS
from specsim.engines.profile import EngineProfile
from specsim.errors import SpecsimError
from specsim.files import read_mapping
from specsim.step.bands import load_spread, unscaled
from specsim.validation.corpus import STATED, load_corpus
from specsim.validation.mapping import to_grid
from specsim.validation.spread import Coverage, coverage, held_out_bands

MODES = ("measured", "priors")


@lru_cache(maxsize=1)
def fit_groups() -> dict[str, str]:
    """group -> the engine parameters fitted on it (data/fits.yaml)."""
    path = Path(str(resources.files("specsim.validation"))) / "data" / "fits.yaml"
    if not path.is_file():
        return {}
    groups = read_mapping(path).get("groups") or {}
    if not isinstance(groups, dict):
        raise SpecsimError(f"{path}: 'groups' must map each group to the figures fitted on it")
    return {str(g): str(why) for g, why in groups.items()}


@dataclass(frozen=True)
class GroupStats:
    group: str
    mode: str
    n: int
    median_abs_error: float
    median_bias: float
    within_10: float
    within_25: float
    hardware_stated: bool
    role: str  # fit | check
    baseline_n: int = 0
    baseline_error: float = float("nan")
    #: the 80% band, drawn from spreads fitted without this group (validation/spread.py): the share of rows whose
    #: published speedup it holds, above it and below it, and its median relative half-width
    band_inside: float = float("nan")
    band_above: float = float("nan")
    band_below: float = float("nan")
    band_half_width: float = float("nan")


@dataclass(frozen=True)
class Crossover:
    sweep: str
    group: str
    batches: tuple[int, ...]
    published: int | None
    anchored: int | None
    priors: int | None


@dataclass(frozen=True)
class PublishedSummary:
    """What `validate --published -f json` writes: the groups' and the overall errors, the crossovers, and the
    unpriced rows by reason."""

    groups: tuple[GroupStats, ...]
    overall: dict[str, GroupStats]  # by mode, rows whose hardware is stated
    crossovers: tuple[Crossover, ...]
    unmapped: dict[str, int]  # reason -> rows
    #: the priors' tokens-per-step band (each group left out of its scale's fit) on the rows that publish it
    tokens_per_step_band: Coverage | None = None


@dataclass(frozen=True)
class PublishedReport:
    rows: pd.DataFrame  # one per scored (row, mode): id, group, mode, published, predicted, error
    groups: tuple[GroupStats, ...]
    crossovers: tuple[Crossover, ...]
    unmapped: pd.Series = field(default_factory=lambda: pd.Series(dtype=object))

    def overall(self, mode: str, stated_only: bool = True) -> GroupStats:
        sel = self.rows[(self.rows["mode"] == mode) & self.rows["error"].notna()]
        if stated_only:
            sel = sel[sel["hardware_stated"]]
        return _stats("overall" + (" (hardware stated)" if stated_only else ""), mode, sel, True, "all")

    def summary(self) -> PublishedSummary:
        return PublishedSummary(self.groups, {m: self.overall(m) for m in MODES}, self.crossovers,
                                {str(k): int(v) for k, v in self.unmapped.value_counts().items()},
                                self.tokens_per_step_band())

    def tokens_per_step_band(self) -> Coverage | None:
        r = self.rows
        if "tps_low" not in r:
            return None
        r = r[(r["mode"] == "priors") & r["error"].notna() & r["acceptance_length"].notna()]
        return coverage(*(r[c].to_numpy(dtype=float) for c in ("acceptance_length", "tokens_per_step", "tps_low",
                                                               "tps_high")))


def _stats(group: str, mode: str, rows: pd.DataFrame, stated: bool, role: str) -> GroupStats:
    err = rows["error"].to_numpy(dtype=float)
    base = rows["baseline_error"].to_numpy(dtype=float) if "baseline_error" in rows else np.array([])
    base = base[np.isfinite(base)]
    if not err.size:
        return GroupStats(group, mode, 0, np.nan, np.nan, np.nan, np.nan, stated, role)
    band = (coverage(*(rows[c].to_numpy(dtype=float) for c in ("published", "predicted", "speedup_low",
                                                               "speedup_high")))
            if "speedup_low" in rows else None)
    return GroupStats(group, mode, int(err.size), float(np.median(np.abs(err))), float(np.median(err)),
                      float(np.mean(np.abs(err) <= 0.10)), float(np.mean(np.abs(err) <= 0.25)), stated, role,
                      int(base.size), float(np.median(base)) if base.size else np.nan,
                      *((band.inside, band.above, band.below, band.half_width) if band else (np.nan,) * 4))


def _priced(grid: pd.DataFrame, corpus: pd.DataFrame, mode: str,
            engines: Mapping[str, EngineProfile] | None = None) -> pd.DataFrame:
    g = grid.copy()
    if mode == "priors":
        g["acceptance_length"] = np.nan
        # held out: the prior never comes from the row's own source
        g["prior_held_out_source"] = corpus.set_index("id").loc[g["id"], "source"].to_numpy()
    else:  # the measured acceptance replaces the prior: its keys would change nothing (advise/request.py)
        g = g[g["acceptance_length"].notna()] if "acceptance_length" in g else g.iloc[:0]
        g = g.drop(columns=[c for c in PRIOR_KEYS if c in g.columns])
    if g.empty:
        return pd.DataFrame(columns=["id", "mode", "predicted", "error"])
    out = evaluate_grid(g, engines)
    pub = corpus.set_index("id").loc[out["id"]]
    predicted = out["speedup"].to_numpy(dtype=float)
    published = pub["speedup"].to_numpy(dtype=float)
    base_pub = pub["baseline_tok_s"].to_numpy(dtype=float)
    base_pred = out["batch"].to_numpy(dtype=float) * 1e3 / out["baseline_step_ms"].to_numpy(dtype=float)
    at_one = out["batch"].to_numpy(dtype=float) == 1
    return pd.DataFrame({
        "id": out["id"].to_numpy(), "group": pub["group"].to_numpy(), "mode": mode,
        "hardware_stated": pub["hardware_confidence"].isin(STATED).to_numpy(),
        "engine": out["engine"].to_numpy(), "hardware": out["hardware"].to_numpy(), "model": out["model"].to_numpy(),
        "draft": out["draft"].to_numpy(), "k": out["k"].to_numpy(), "batch": out["batch"].to_numpy(),
        "acceptance_length": pub["acceptance_length"].to_numpy(dtype=float),
        "tokens_per_step": out["tokens_per_step"].to_numpy(dtype=float),
        # the prior's own band (the answer's is drawn at the shipped acceptance_scale: the fit must not see it)
        **{f"tau_{end}": unscaled(out["tokens_per_step"].to_numpy(dtype=float),
                                  out[f"tokens_per_step_{end}"].to_numpy(dtype=float), load_spread().acceptance_scale)
           for end in ("low", "high")},
        "published": published, "predicted": predicted, "error": predicted / published - 1.0,
        "baseline_error": np.where(at_one & np.isfinite(base_pub), base_pred / base_pub - 1.0, np.nan),
        "predicted_error": out["error"].to_numpy(),
    })


def _first_below_one(batches: np.ndarray, speedups: np.ndarray) -> int | None:
    below = np.flatnonzero(speedups < 1.0)
    return int(batches[below[0]]) if below.size else None


def _crossovers(grid: pd.DataFrame, corpus: pd.DataFrame,
                engines: Mapping[str, EngineProfile] | None = None) -> list[Crossover]:
    """Batch sweeps (>= 3 batches of one configuration) and where speculation stops paying."""
    pub = corpus.set_index("id")
    g = grid.assign(group=pub.loc[grid["id"], "group"].to_numpy(), dataset=pub.loc[grid["id"], "dataset"].astype(str)
                    .to_numpy(), published=pub.loc[grid["id"], "speedup"].to_numpy(dtype=float))
    keys = ["group", "hardware", "model", "engine", "draft", "k", "dataset"]
    out = []
    for key, sweep in g.groupby(keys, sort=False, dropna=False):
        sweep = sweep.sort_values("batch")
        if sweep["batch"].nunique() < 3:
            continue
        batches = sweep["batch"].to_numpy(dtype=int)
        dense = np.arange(int(batches.min()), int(batches.max()) + 1)
        probe = pd.DataFrame([sweep.iloc[0].to_dict()] * len(dense)).assign(batch=dense)
        probe = probe.drop(columns=["acceptance_length"], errors="ignore")
        probe["prior_held_out_source"] = pub.loc[sweep["id"].iloc[0], "source"]  # held out, as in _priced
        priors = evaluate_grid(probe, engines)
        sp = priors["speedup"].to_numpy(dtype=float)
        # anchored: tokens per step scaled so the lowest batch reproduces the source (speedup is linear in it)
        scale = sweep["published"].iloc[0] / sp[0] if np.isfinite(sp[0]) and sp[0] > 0 else np.nan
        tps = priors["tokens_per_step"].to_numpy(dtype=float) * scale
        anchored_rows = probe.assign(acceptance_length=np.maximum(tps, 1.0))
        anchored = evaluate_grid(anchored_rows.drop(columns=[c for c in PRIOR_KEYS if c in probe.columns]),
                                 engines)["speedup"].to_numpy(dtype=float)
        label = f"{key[0]}: {key[2]} {key[4]} k={key[5]} on {key[1]} ({key[3]})"
        out.append(Crossover(label, str(key[0]), tuple(int(b) for b in batches),
                             _first_below_one(batches, sweep["published"].to_numpy(dtype=float)),
                             _first_below_one(dense, anchored), _first_below_one(dense, sp)))
    return out


def score(corpus: pd.DataFrame | None = None, engines: Mapping[str, EngineProfile] | None = None,
          crossovers: bool = True) -> PublishedReport:
    """Price every priceable published result in both acceptance modes and summarise (`engines`
    replaces bundled engine profiles by name)."""
    c = load_corpus() if corpus is None else corpus
    grid, unmapped = to_grid(c)
    if grid.empty:
        why = "; ".join(f"{n} {reason}" for reason, n in unmapped.value_counts().head(3).items())
        raise SpecsimError(f"none of the corpus's {len(c)} rows can be priced" + (f" ({why})" if why else ""))
    # the crossover sweeps (a third of the work) run beside the pricing in a forked worker where there is a
    # second CPU: `validate --published` 3.3 -> 2.4 s on 2 cores, results identical
    pending = _beside(_crossovers, grid, c, engines) if crossovers else None
    rows = pd.concat([_priced(grid, c, m, engines) for m in MODES], ignore_index=True)
    scored = rows["error"].notna()
    rows = pd.concat([held_out_bands(rows[scored]), rows[~scored]]).loc[rows.index]
    fits = fit_groups()
    stats = []
    for (group, mode), sel in rows.groupby(["group", "mode"], sort=True):
        ok = sel[sel["error"].notna()]
        stats.append(_stats(str(group), str(mode), ok, bool(sel["hardware_stated"].all()),
                            "fit" if group in fits else "check"))
    return PublishedReport(rows, tuple(stats), tuple(pending() if pending is not None else ()), unmapped)


def _beside(fn: Callable[..., list[Crossover]], *args: object) -> Callable[[], list[Crossover]]:
    """`fn(*args)` started in a forked worker when this machine has a second CPU and forks (else run here,
    when asked for); returns what gives its result."""
    import multiprocessing
    import os

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if cpus < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return lambda: fn(*args)
    from concurrent.futures import ProcessPoolExecutor

    from specsim.forking import fork_context

    pool = ProcessPoolExecutor(1, mp_context=fork_context())
    future = pool.submit(fn, *args)

    def result() -> list[Crossover]:
        try:
            return future.result()
        finally:
            pool.shutdown()
    return result

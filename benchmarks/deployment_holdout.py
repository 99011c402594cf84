"""Issue "Your deployment in": fit a deployment on some of its runs, predict the others, never scoring a fitted point.

On the serving corpus (specsim/validation/data/serving.csv, each row a published measurement naming its source),
per deployment (validation.serving's key: every stated field but the load):
- `ends`: fit on the lowest and the highest concurrency of each arm, predict the points between;
- `off+counters`: fit the spec-off arm alone (every load) with the source's acceptance length, predict the
  spec-on arm at every load;
- `k`: where a deployment was measured at several k, fit at one k (both arms, lowest and highest load), predict
  the other k's spec-on arm.
Scored: median |error| of the on/off throughput ratio and TPOT ratio, of absolute output throughput and TPOT
(both arms), and the share of predicted figures inside the deployment's 80% band (1.2816 sigma_log).
Each mode runs with the source's acceptance where it gives one (as counters would), and without it (fitted).

    python benchmarks/deployment_holdout.py            # every mode, a table per mode
    python benchmarks/deployment_holdout.py --json out.json --rows points.json
- `loglog`: no model, each held-out figure interpolated in log-log between the same two loads (the baseline);
- `example`: the bundled real runs (examples/runs/dsv4-flash-b300), fitted on each arm's lowest and highest rate,
  the others predicted.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from specsim.advise.fit_runs import Point, fit_deployment, simulate_points
from specsim.errors import SpecsimError
from specsim.validation.serving import _deployment, load_corpus, state

Z80 = 1.2816


def _points(g: pd.DataFrame, arms: tuple[str, ...], flags) -> list[Point]:  # type: ignore[no-untyped-def]
    out = []
    for _, r in g.iterrows():
        for arm in arms:
            tok, tpot = r[f"output_tok_s_{arm}"], r[f"tpot_mean_ms_{arm}"]
            if not np.isfinite(tok):
                continue
            n = r.get("num_prompts")
            out.append(Point(arm, int(r["concurrency"]), flags.input_len, flags.output_len, float(tok),
                             float(tpot), int(n) if np.isfinite(n) else None, str(r["id"])))
    return out


def _flags(row: pd.Series, measured: bool):  # type: ignore[no-untyped-def]
    st = state(row, "measured" if measured else "priors")
    if st.flags is None:
        return None
    return dataclasses.replace(st.flags, acceptance_length=None)


def _score(fit_sigma: float, pts: list[Point], pred: np.ndarray) -> list[dict[str, object]]:
    rows = []
    for p, (tok, tpot) in zip(pts, pred[:, :2], strict=True):
        rows.append({"arm": p.arm, "load": p.load, "id": p.label, "tok": tok, "tok_meas": p.output_tok_s,
                     "tpot": tpot, "tpot_meas": p.tpot_mean_ms, "sigma": fit_sigma})
    return rows


def _ratios(rows: list[dict[str, object]]) -> dict[str, list[float]]:
    df = pd.DataFrame(rows)
    out: dict[str, list[float]] = {"ratio": [], "tpot_ratio": [], "tok": [], "tpot": [], "inside": []}
    for _, r in df.iterrows():
        for name, meas in (("tok", "tok_meas"), ("tpot", "tpot_meas")):
            if np.isfinite(r[meas]):
                e = float(r[name]) / float(r[meas]) - 1
                out[name].append(e)
                err = abs(math.log(float(r[name]) / float(r[meas])))
                out["inside"].append(float(err <= Z80 * float(r["sigma"])))
    for _, g in df.groupby(["dep", "load"]) if "dep" in df else []:
        on, off = g[g.arm == "on"], g[g.arm == "off"]
        if len(on) and len(off):
            for name, meas, key in (("tok", "tok_meas", "ratio"), ("tpot", "tpot_meas", "tpot_ratio")):
                m = float(on[meas].iloc[0]) / float(off[meas].iloc[0])
                if np.isfinite(m):
                    out[key].append(float(on[name].iloc[0]) / float(off[name].iloc[0]) / m - 1)
    return out


def run_ends(corpus: pd.DataFrame, measured: bool) -> tuple[list[dict[str, object]], list[str]]:
    rows, notes = [], []
    for key, g in corpus.groupby(_deployment(corpus), sort=False):
        g = g.sort_values("concurrency")
        loads = sorted(set(g["concurrency"].dropna()))
        if len(loads) < 3 or g["output_tok_s_on"].isna().all() or g["output_tok_s_off"].isna().all():
            continue
        flags = _flags(g.iloc[0], measured)
        if flags is None:
            notes.append(f"{key[:60]}: not stated")
            continue
        ends = g[g["concurrency"].isin([loads[0], loads[-1]])]
        mid = g[~g["concurrency"].isin([loads[0], loads[-1]])]
        tau = None
        if measured:
            taus = ends["acceptance_length"].dropna()
            tau = float(taus.mean()) if len(taus) else None
            if tau is None:
                continue
        try:
            fit = fit_deployment(flags, _points(ends, ("off", "on"), flags), tau_measured=tau)
        except SpecsimError as exc:
            notes.append(f"{key[:60]}: {exc}")
            continue
        d = fit.deployment
        mid_pts = _points(mid, ("off", "on"), flags)
        tau_mid = tau if tau is not None else d.tokens_per_step()
        pred = simulate_points(flags, d.calibration, tau_mid, mid_pts)
        rows += [{**r, "dep": str(key)} for r in _score(d.sigma_log, mid_pts, pred)]
    return rows, notes


def run_loglog(corpus: pd.DataFrame) -> tuple[list[dict[str, object]], list[str]]:
    """No model: each figure between the lowest and highest load interpolated linearly in log-log (the baseline
    a fit must beat)."""
    rows = []
    for key, g in corpus.groupby(_deployment(corpus), sort=False):
        g = g.dropna(subset=["concurrency"]).sort_values("concurrency")
        if len(set(g["concurrency"])) < 3 or g["output_tok_s_on"].isna().all() or g["output_tok_s_off"].isna().all():
            continue
        x = np.log(g["concurrency"].to_numpy(float))
        ends = [0, len(g) - 1]
        for arm in ("off", "on"):
            pred = {m: np.exp(np.interp(x, x[ends], np.log(g[f"{m}_{arm}"].to_numpy(float))[ends]))
                    for m in ("output_tok_s", "tpot_mean_ms")}
            for i in range(1, len(g) - 1):
                r = g.iloc[i]
                rows.append({"arm": arm, "load": f"concurrency {int(r['concurrency'])}", "id": str(r["id"]),
                             "tok": pred["output_tok_s"][i], "tok_meas": r[f"output_tok_s_{arm}"],
                             "tpot": pred["tpot_mean_ms"][i], "tpot_meas": r[f"tpot_mean_ms_{arm}"], "sigma": 0.0,
                             "dep": str(key)})
    return rows, []


def _band_sigma(flags, d) -> float:  # type: ignore[no-untyped-def]
    """The spread the tool's bands take for the deployment's own draft: the fit's, or, where the runs did not
    measure it speculating, the engine's measured step spread (scenario/deployment.py calibration_for)."""
    from specsim.advise.fit_runs import _setup
    from specsim.step.bands import spread_for

    engine = _setup(flags).target.engine.name
    cal = d.calibration_for(d.draft)
    return cal.sigma_log if cal.sigma_log is not None else spread_for(engine).sigma(spread_for(engine).step_sigma,
                                                                                    engine)


def run_off_counters(corpus: pd.DataFrame) -> tuple[list[dict[str, object]], list[str]]:
    rows, notes = [], []
    for key, g in corpus.groupby(_deployment(corpus), sort=False):
        loads = sorted(set(g["concurrency"].dropna()))
        taus = g["acceptance_length"].dropna()
        if len(loads) < 2 or not len(taus) or g["output_tok_s_on"].isna().all():
            continue
        flags = _flags(g.iloc[0], True)
        if flags is None:
            continue
        tau = float(taus.mean())
        try:
            fit = fit_deployment(flags, _points(g, ("off",), flags), tau_measured=tau)
        except SpecsimError as exc:
            notes.append(f"{key[:60]}: {exc}")
            continue
        on = _points(g, ("on",), flags)
        pred = simulate_points(flags, fit.deployment.calibration, tau, on)
        off_fit = _points(g, ("off",), flags)
        rows += [{**r, "dep": str(key)} for r in _score(_band_sigma(flags, fit.deployment), on, pred)]
        rows += [{**r, "dep": str(key), "fitted": True} for r in _score(0.0, off_fit, fit.predicted)]
    return rows, notes


def run_k(corpus: pd.DataFrame) -> tuple[list[dict[str, object]], list[str]]:
    """Deployments measured at several k: fit one k (both arms, its lowest and highest load, the source's
    acceptance), predict the other k's spec-on arm at every load with its own published acceptance."""
    rows, notes = [], []
    keys = _deployment(corpus.assign(k="any"))
    for key, g in corpus.groupby(keys, sort=False):
        ks = sorted(set(g["k"].dropna()))
        if len(ks) < 2:
            continue
        for k_fit in ks:
            fit_rows = g[g["k"] == k_fit].sort_values("concurrency")
            loads = sorted(set(fit_rows["concurrency"]))
            taus = fit_rows["acceptance_length"].dropna()
            flags = _flags(fit_rows.iloc[0], bool(len(taus)))
            if flags is None or len(loads) < 2:
                continue
            ends = fit_rows[fit_rows["concurrency"].isin([loads[0], loads[-1]])]
            try:
                pts = _points(ends, ("off", "on"), flags)
                d = fit_deployment(flags, pts, tau_measured=float(taus.mean()) if len(taus) else None).deployment
            except SpecsimError as exc:
                notes.append(f"{key[:60]} k={k_fit:g}: {exc}")
                continue
            for k_new in (k for k in ks if k != k_fit):
                other = g[g["k"] == k_new]
                f2 = _flags(other.iloc[0], False)
                tau2 = other["acceptance_length"].dropna()
                tau_new = float(tau2.mean()) if len(tau2) else d.tokens_per_step(int(k_new))
                if f2 is None or tau_new is None:
                    continue
                pts = _points(other, ("on",), f2)
                pred = simulate_points(f2, d.calibration, tau_new, pts)
                rows += [{**r, "dep": f"{key}|k{k_fit:g}->{k_new:g}"} for r in _score(d.sigma_log, pts, pred)]
    return rows, notes


def _summary(name: str, rows: list[dict[str, object]]) -> dict[str, object]:
    scored = [r for r in rows if not r.get("fitted")]
    fitted_off = {(r["dep"], r["load"]): r for r in rows if r.get("fitted")}
    for r in scored:  # the on/off ratio with the spec-off arm as fitted (off+counters scores the on arm only)
        off = fitted_off.get((r["dep"], r["load"]))
        if off is not None:
            r["off_tok"], r["off_tok_meas"] = off["tok"], off["tok_meas"]
            r["off_tpot"], r["off_tpot_meas"] = off["tpot"], off["tpot_meas"]
    e = _ratios(scored)
    if fitted_off:
        for r in scored:
            if "off_tok" in r:
                e["ratio"].append(float(r["tok"]) / float(r["off_tok"]) / (float(r["tok_meas"])
                                                                           / float(r["off_tok_meas"])) - 1)
                if np.isfinite(float(r["tpot_meas"])) and np.isfinite(float(r["off_tpot_meas"])):
                    e["tpot_ratio"].append(float(r["tpot"]) / float(r["off_tpot"])
                                           / (float(r["tpot_meas"]) / float(r["off_tpot_meas"])) - 1)

    def med(x: list[float]) -> float:
        return float(np.median(np.abs(x))) if x else float("nan")

    deps = len({r["dep"] for r in scored})
    return {"mode": name, "deployments": deps, "points": len(scored), "ratio": med(e["ratio"]),
            "ratio_n": len(e["ratio"]), "tpot_ratio": med(e["tpot_ratio"]), "tpot_ratio_n": len(e["tpot_ratio"]),
            "tok": med(e["tok"]), "tok_n": len(e["tok"]), "tpot": med(e["tpot"]), "tpot_n": len(e["tpot"]),
            "inside80": float(np.mean(e["inside"])) if e["inside"] else float("nan")}


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "runs" / "dsv4-flash-b300"
EXAMPLE_FIT = ("off_qps1", "off_qps8", "mtp1_qps1", "mtp1_qps8")


def run_example() -> tuple[list[dict[str, object]], list[str]]:
    """The bundled real runs (examples/runs/dsv4-flash-b300, SOURCES.md): fitted on each arm's lowest and highest
    rate with the runs' own acceptance counters, the other runs predicted."""
    from specsim.advise.benchmark import BenchmarkFlags
    from specsim.calibration.runs import read_run

    runs = {f.stem: read_run(f)[0] for f in sorted(EXAMPLE.glob("*.json"))}

    def point(name: str) -> Point:
        r = runs[name]
        return Point("on" if name.startswith("mtp") else "off", None, round(r.input_len_mean),
                     round(r.output_len_mean), r.output_tok_s, r.tpot_mean_ms, r.num_prompts, name, r.request_rate,
                     r.ttft_mean_ms)

    flags = BenchmarkFlags(hardware="b300", model="deepseek-ai/DeepSeek-V4-Flash", drafts=("mtp",), tp=8,
                           kv_dtype="fp8", k=1)
    tau = float(np.mean([runs[n].acceptance_length or np.nan for n in EXAMPLE_FIT if n.startswith("mtp")]))
    d = fit_deployment(flags, [point(n) for n in EXAMPLE_FIT], tau_measured=tau).deployment
    held = [point(n) for n in runs if n not in EXAMPLE_FIT]
    pred = simulate_points(flags, d.calibration, tau, held)
    return [{**r, "dep": "dsv4-flash-b300"} for r in _score(d.sigma_log, held, pred)], [d.calibration.label]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write each protocol's summary here")
    ap.add_argument("--rows", help="write each protocol's predicted points here")
    ap.add_argument("--modes", default="given,fitted,off,k,loglog,example",
                    help="which protocols: given, fitted, off, k, loglog, example")
    args = ap.parse_args(argv)
    corpus = load_corpus()
    out, rows_out = {}, {}
    t0 = time.perf_counter()
    modes = {"given": ("ends, acceptance given", lambda: run_ends(corpus, True)),
             "fitted": ("ends, acceptance fitted", lambda: run_ends(corpus, False)),
             "off": ("off + counters -> on", lambda: run_off_counters(corpus)),
             "k": ("one k -> the others", lambda: run_k(corpus)),
             "loglog": ("no model: log-log between", lambda: run_loglog(corpus)),
             "example": ("bundled example", run_example)}
    for key in args.modes.split(","):
        name, run = modes[key]
        rows, notes = run()
        s = _summary(name, rows)
        out[key] = {"summary": s, "notes": notes}
        rows_out[key] = rows
        print(f"{name:26s} deployments {s['deployments']:2d} points {s['points']:3d}  x tok/s {s['ratio']:6.1%} "
              f"(n {s['ratio_n']})  x TPOT {s['tpot_ratio']:6.1%} (n {s['tpot_ratio_n']})  tok/s {s['tok']:6.1%}  "
              f"TPOT {s['tpot']:6.1%}  in 80% band {s['inside80']:.0%}", flush=True)
        for n in notes:
            print("   ", n)
    print(f"({time.perf_counter() - t0:.0f} s)")
    for path, data in ((args.json, out), (args.rows, rows_out)):
        if path:
            with open(path, "w") as f:
                json.dump(data, f, indent=1, default=float)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`specsim evaluate --grid` and `specsim validate --published`: many questions at once, and the
error of the answers against published results. The `evaluate` and `validate` commands (cli/spec.py)
call these."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from specsim.cli._format import console, emit, emit_mapping, emit_records, plain, print_json, working
from specsim.errors import SpecsimError, missing_extra
from specsim.files import Outputs, read_text
from specsim.records import to_record

EXIT_PARTIAL = 4  # some rows of a grid answered, some not (README, "Exit statuses")


def run_grid(path: Path, output: Path | None, fmt: str) -> int:
    """Answer every row of a CSV (columns named as evaluate's options; relative paths in cells read from the
    CSV's folder); write OUT.csv or print it. Returns the exit status: 0 every row answered; EXIT_PARTIAL when
    some rows could not be (the rest are answered, each failed row's reason in `error`); a grid no row of which
    could be answered is bad input (SpecsimError: nothing written)."""
    from io import StringIO

    from specsim.advise.grid import check_columns, evaluate_grid

    text = read_text(path, "grid")
    try:
        frame = pd.read_csv(StringIO(text), dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        raise SpecsimError(f"{path}: not a readable CSV ({str(exc).splitlines()[0]})") from None
    if frame.empty:
        raise SpecsimError(f"{path}: no rows")
    check_columns([str(c) for c in frame.columns], str(path))
    with working(f"answering {len(frame):,} rows..."):
        out = evaluate_grid(frame, base=path.parent)
    failed = int((out["error"] != "").sum())
    if failed == len(out):
        raise SpecsimError(f"{path}: no row could be answered, e.g. row 1: {out['error'].iloc[0]}")
    if output is not None:
        with Outputs() as outs:
            out.to_csv(outs.path(output), index=False)
        emit_mapping({"rows": len(out), "answered": len(out) - failed, "failed": failed,
                      "output": str(output)}, fmt if fmt != "table" else "table", "evaluate --grid")
    else:
        emit(out, "csv" if fmt == "table" else fmt, "evaluate --grid")
    if failed:
        first = int(np.flatnonzero(out["error"].to_numpy() != "")[0])
        print(f"warning: {failed} of {len(out)} rows could not be answered (their reason is in the error column; "
              f"exit status {EXIT_PARTIAL}), e.g. row {first + 1}: {out['error'].iloc[first]}", file=sys.stderr)
        return EXIT_PARTIAL
    return 0


def _band_cells(g: object) -> dict[str, str]:
    """A group's band coverage (and the shares above / below it) and median relative half-width."""
    inside, above, below, half = (getattr(g, f"band_{x}") for x in ("inside", "above", "below", "half_width"))
    if not np.isfinite(inside):
        return {"in band": "-", "band half-width": "-"}
    return {"in band": f"{inside:.0%}", "above band": f"{above:.0%}", "below band": f"{below:.0%}",
            "band half-width": f"{half:.0%}"}


def _fmt_pct(x: float) -> str:
    return "-" if not np.isfinite(x) else f"{x * 100:+.1f}%"


def run_published(fmt: str, corpus: Path | None = None) -> None:
    """Score the planner on the published corpus and print the per-group table and crossovers."""
    from specsim.validation.corpus import load_corpus
    from specsim.validation.score import MODES, score

    with working("pricing the published results..."):
        table = load_corpus(corpus) if corpus is not None else None  # its own errors name the file
        try:
            report = score(table)
        except SpecsimError as exc:
            raise SpecsimError(f"{corpus}: {exc}" if corpus is not None else str(exc)) from None
    if fmt == "json":
        print_json(to_record(report.summary()))
        return
    rows = []
    for mode in MODES:
        for g in report.groups:
            if g.mode == mode and g.n:
                stated = "stated" if g.hardware_stated else "not stated"
                rows.append({"mode": mode, "group": g.group, "hardware": stated, "role": g.role, "n": g.n,
                             "median |error|": f"{g.median_abs_error * 100:.1f}%",
                             "median bias": _fmt_pct(g.median_bias), "within 10%": f"{g.within_10:.0%}",
                             "within 25%": f"{g.within_25:.0%}",
                             "baseline tok/s error": _fmt_pct(g.baseline_error) if g.baseline_n else "-",
                             **_band_cells(g)})
        o = report.overall(mode)
        rows.append({"mode": mode, "group": "OVERALL (hardware stated)", "hardware": "stated", "role": "all",
                     "n": o.n, "median |error|": f"{o.median_abs_error * 100:.1f}%",
                     "median bias": _fmt_pct(o.median_bias), "within 10%": f"{o.within_10:.0%}",
                     "within 25%": f"{o.within_25:.0%}", "baseline tok/s error": "-", **_band_cells(o)})
    if fmt == "table":  # one narrow table per mode (80 columns)
        for mode, what in (("measured", "the source's measured acceptance given"), ("priors", "nothing given: "
                                                                                     "acceptance from the priors")):
            emit_records([{"group": str(r["group"]).replace("OVERALL (hardware stated)", "OVERALL (hw stated)"),
                           "role": r["role"], "hw": "yes" if r["hardware"] == "stated" else "no", "n": r["n"],
                           "|err|": r["median |error|"], "bias": r["median bias"], "<=10%": r["within 10%"],
                           "base": r["baseline tok/s error"], "band": r["in band"],
                           "+-": r["band half-width"]}
                          for r in rows if r["mode"] == mode], "table",
                         f"planner vs published speedups, {what} (median |error|, median bias, share within "
                         "10%, baseline tok/s error; hw: hardware stated; band: share inside the 80% "
                         "band, drawn with the group left out, and its median half-width)")
    else:
        emit(pd.DataFrame(rows), fmt, "planner vs published speedups (measured = the source's acceptance given; "
                                      "priors = nothing given)")
    cross = pd.DataFrame([{"sweep": c.sweep, "batches": f"{c.batches[0]}-{c.batches[-1]}",
                           "published first < 1x": plain(c.published) or "none",
                           "predicted (anchored)": plain(c.anchored) or "none",
                           "predicted (priors)": plain(c.priors) or "none"} for c in report.crossovers])
    if not cross.empty and fmt == "table":  # short headers: the sweep names keep the width
        emit(cross.set_axis(["sweep", "batches", "published", "anchored", "priors"], axis=1), fmt,
             "batch crossovers: the first batch where speculation stops paying, published and predicted (anchored "
             "to the source's lowest batch; from priors)")
    elif not cross.empty:
        emit(cross, fmt, "batch crossovers (first batch where speculation stops paying)")
    tps = report.tokens_per_step_band()
    if fmt == "table" and tps is not None and tps.n:
        console().print(f"tokens per step from the priors: {tps.inside:.0%} of {tps.n} published values inside their "
                        f"80% band ({tps.above:.0%} above, {tps.below:.0%} below; median half-width "
                        f"{tps.half_width:.0%}), the band drawn with each group left out", markup=False)
    if fmt == "table":
        unmapped = report.unmapped.value_counts()
        console().print(f"{len(report.unmapped)} published rows not priced: "
                        + "; ".join(f"{n} {why}" for why, n in unmapped.head(6).items()), markup=False)


def run_modules(fmt: str) -> None:
    """`validate --modules`: specsim's ops of the models NVIDIA's module tables name, scored on them."""
    from specsim.cost.aiconfigurator import installed_version
    from specsim.validation.modules import score_modules

    if installed_version() is None:
        raise missing_extra("tables", "aiconfigurator-core", "validate --modules")
    with working("pricing NVIDIA's GDN and DSA module tables"):
        table = score_modules()
    emit(table, fmt, f"token mixers vs NVIDIA's module tables (aiconfigurator-core {installed_version()}): "
         "median |error| and bias of the predicted kernel time, newest table per framework")


def _share(x: float) -> str:
    return "-" if x != x else f"{x:.0%}"


def _pct(x: float) -> str:
    return "-" if x != x else f"{x * 100:+.1f}%"


def _abs_pct(x: float) -> str:
    return "-" if x != x else f"{x * 100:.1f}%"


def run_serving(fmt: str, corpus: Path | None = None) -> None:
    """`validate --serving`: the serving simulator against published serving measurements (speculation off and
    on), per source group, with the source's acceptance and with the priors."""
    from specsim.validation.serving import MODES, band_by_figure, reasons, validate_serving

    with working("simulating the published serving load points..."):
        result = validate_serving(corpus)
    g, bands = result.groups, band_by_figure(result)
    if fmt == "json":
        print_json({"groups": plain(g.to_dict(orient="records")), "bands": plain(bands.to_dict(orient="records")),
                    "crossovers": plain(result.crossovers.to_dict(orient="records")),
                    "not_stated": {str(k): int(v) for k, v in reasons(result).items()}})
        return
    if fmt == "csv":
        emit(result.rows, "csv")
        return
    titles = {"measured": "the source's acceptance length given", "priors": "acceptance from the priors"}
    for mode in MODES:
        part = g[g["mode"] == mode]
        records = [{"group": r["group"], "rows": f"{r['stated']}/{r['rows']}",
                    "x tok/s": _abs_pct(r["ratio_abs"]), "bias": _pct(r["ratio_bias"]),
                    "x TPOT": _abs_pct(r["tpot_ratio_abs"]), "bias ": _pct(r["tpot_ratio_bias"]),
                    "tok/s": _abs_pct(r["tput_abs"]), "TPOT": _abs_pct(r["tpot_abs"]),
                    "cross": f"{r['crossover_hits']}/{r['crossover_n']}" if r["crossover_n"] else "-"}
                   for _, r in part.iterrows() if r["stated"] or r["group"] == "OVERALL"]
        emit_records(records, fmt, f"serving simulation vs published serving, {titles[mode]}: median |error| of the "
                                   "on/off ratios (x, with their bias) and of both arms' output tok/s and TPOT; "
                                   "crossovers within one sweep step")
        o = part[part["group"] == "OVERALL"].iloc[0]
        mine = bands[bands["mode"] == mode]
        if o["band_n"] and len(mine):
            emit_records([{"figure": b["figure"], "n": int(b["n"]), "inside": _share(b["inside"]),
                           "above": _share(b["above"]), "below": _share(b["below"]),
                           "half-width": _share(b["half_width"])} for _, b in mine.iterrows()], fmt,
                         f"80% bands, {titles[mode]}: {_share(o['band_inside'])} of {int(o['band_n'])} predicted "
                         "figures hold the measured one; per figure (per group in -f json)")
    why = reasons(result)
    if len(why):
        console().print(f"{int(why.sum())} rows not stated: " + "; ".join(f"{n} {k}" for k, n in why.items()),
                        markup=False)


def run_long_context(fmt: str, corpus: Path | None = None) -> None:
    """`validate --long-context`: the planner against published long-context (KV >= 16k) speculative results, per
    source group and mode, with whether speculation pays called right; rows specsim cannot ask, by reason."""
    import dataclasses

    from specsim.validation.long_context import counts, load_long_context, score_long_context, summary

    with working("pricing the published long-context results..."):
        result = score_long_context(load_long_context(corpus) if corpus is not None else None)
    table, n = summary(result), counts(result)
    if fmt == "json":
        print_json({"counts": dataclasses.asdict(n), "groups": plain(table.to_dict(orient="records"))})
        return
    if fmt == "csv":
        emit(result.rows, "csv")
        return
    titles = {"measured": "the source's acceptance given", "priors": "acceptance from the priors"}
    for mode, what in titles.items():
        part = table[table["mode"] == mode]
        emit_records([{"group": r["group"], "n": r["n"], "|err|": _abs_pct(r["median_abs_error"]),
                       "bias": _pct(r["median_bias"]), "<=15%": _share(r["within_15"]),
                       "pays right": _share(r["pays_right"]), "band": _share(r["in_band"])}
                      for _, r in part.iterrows()], fmt,
                     f"planner vs published long-context speedups (KV >= 16k), {what}: median |error|, median bias, "
                     "share within 15%, share where whether speculation pays is called right, share inside the 80% "
                     "band (drawn with the group left out)")
    console().print(f"{n.rows} rows from {n.sources} source documents ({n.groups} groups); {n.askable} asked; "
                    f"{n.rows - n.askable} not askable: " + "; ".join(f"{k} [{v}]" for k, v in n.not_askable.items()),
                    markup=False)

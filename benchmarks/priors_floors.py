"""The acceptance priors against published measurements, priors only (no acceptance given).

    python benchmarks/priors_floors.py            # corpus in-sample and held out, by group; catalogue LOSO
    python benchmarks/priors_floors.py --only corpus --json PATH   # the corpus part, also as JSON (README)

At a fixed configuration the step time does not depend on acceptance, so tau_prior / tau_published - 1
is the error a prior adds to a predicted speedup (specsim.acceptance.holdout). "In-sample": the catalogue
holds every source; "held out": each row's own source is removed from the catalogue before the lookup.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from specsim.acceptance.holdout import ErrorSummary, by_group, catalogue_holdout, published_holdout, summarize


def _record(s: ErrorSummary) -> dict[str, Any]:
    return dataclasses.asdict(s)


def _print(title: str, rows: list, out: dict[str, Any], key: str) -> None:
    print(f"{title}: {summarize(rows)}")
    groups = by_group(rows)
    for group, s in groups.items():
        print(f"    {group:30s} {s}")
    out[key] = {"all": _record(summarize(rows)), "groups": {g: _record(s) for g, s in groups.items()}}


def corpus(out: dict[str, Any]) -> None:
    for held in (False, True):
        name = "held out (own source removed)" if held else "in-sample"
        key = "held_out" if held else "in_sample"
        _print(f"published corpus, {name}", published_holdout(held_out=held), out, key)
        _print("  stated hardware only", published_holdout(held_out=held, stated_hardware=True), out,
               f"{key}_stated")


def catalogue(out: dict[str, Any]) -> None:
    _print("catalogue, leave-one-source-out", catalogue_holdout(), out, "catalogue")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="corpus,catalogue", help="parts to run: corpus,catalogue")
    ap.add_argument("--json", type=Path, help="also write the results to this JSON file")
    args = ap.parse_args()
    t0 = time.perf_counter()
    out: dict[str, Any] = {}
    parts = {"corpus": corpus, "catalogue": catalogue}
    for name in args.only.split(","):
        if name:
            parts[name](out)
    print(f"({time.perf_counter() - t0:.1f} s)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

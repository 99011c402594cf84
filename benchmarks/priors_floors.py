"""The acceptance priors against published measurements, priors only (no acceptance given).

    python benchmarks/priors_floors.py            # corpus in-sample and held out, by group; catalogue LOSO

At a fixed configuration the step time does not depend on acceptance, so tau_prior / tau_published - 1
is the error a prior adds to a predicted speedup (specsim.acceptance.holdout). "In-sample": the catalogue
holds every source; "held out": each row's own source is removed from the catalogue before the lookup.
"""

from __future__ import annotations

import time

from specsim.acceptance.holdout import by_group, catalogue_holdout, published_holdout, summarize


def main() -> None:
    t0 = time.perf_counter()
    for held in (False, True):
        name = "held out (own source removed)" if held else "in-sample"
        rows = published_holdout(held_out=held)
        print(f"published corpus, {name}: {summarize(rows)}")
        for group, s in by_group(rows).items():
            print(f"    {group:30s} {s}")
        stated = published_holdout(held_out=held, stated_hardware=True)
        print(f"  stated hardware only: {summarize(stated)}")
        for group, s in by_group(stated).items():
            print(f"    {group:30s} {s}")
    rows = catalogue_holdout()
    print(f"catalogue, leave-one-source-out: {summarize(rows)}")
    for group, s in by_group(rows).items():
        print(f"    {group:30s} {s}")
    print(f"({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()

"""Fit the bands' spreads (specsim/step/data/spread.yaml) on the published corpus (not part of the test run).

    python benchmarks/fit_spread.py            # print
    python benchmarks/fit_spread.py --write    # and write specsim/step/data/spread.yaml

Every scored row of `specsim validate --published` (both modes, the priors held out by source) fits the spreads
(specsim/validation/spread.py says how); the file names the groups and rows. `validate --published` judges the
bands with each group left out of this fit in turn.
"""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path

import yaml

from specsim.validation.score import score
from specsim.validation.spread import fit_spread

OUT = Path(__file__).resolve().parents[1] / "specsim" / "step" / "data" / "spread.yaml"


def main() -> None:
    rows = score(crossovers=False).rows
    rows = rows[rows["error"].notna()]
    sp = fit_spread(rows)
    measured = rows[rows["mode"] == "measured"]
    n_priors = int((rows["mode"] == "priors").sum())
    text = (f"# The bands' spreads (specsim/step/bands.py), fitted by `python benchmarks/fit_spread.py --write` on "
            f"{date.today()}\n# on the published corpus (specsim/validation/data): {len(measured)} rows with the "
            f"source's acceptance given ({measured['group'].nunique()} groups), {n_priors} "
            "priced from the priors\n# (held out by source); plain decoding tok/s rows for step_sigma. In-sample: "
            "`specsim validate --published` scores the bands\n# with each group left out of this fit.\n")
    data = {"source": f"benchmarks/fit_spread.py on specsim/validation/data ({len(rows)} scored rows)",
            "speedup_bias": round(sp.speedup_bias, 4),
            "speedup_sigma": {k: round(v, 4) for k, v in sorted(sp.speedup_sigma.items())},
            "step_sigma": {k: round(v, 4) for k, v in sorted(sp.step_sigma.items())},
            "acceptance_scale": round(sp.acceptance_scale, 4),
            "fitted_on": {"groups": sorted(map(str, rows["group"].unique()))}}
    out = text + yaml.safe_dump(data, sort_keys=False, width=110)
    print(out)
    if "--write" in sys.argv[1:]:
        OUT.write_text(out)


if __name__ == "__main__":
    main()

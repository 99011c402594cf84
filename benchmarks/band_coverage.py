"""How often the 80% bands hold on the published corpus, each source group left out of the spreads' fit (not part
of the test run; `specsim validate --published` prints the per-group figures).

    python benchmarks/band_coverage.py

Per mode: the share of published speedups inside their band, above and below it, its median relative
half-width, and the half-width of a constant band that holds as often on the same rows (the band must be
narrower to carry information about the question); the priors' tokens per step the same way; and, for the
data-dependent drafts (n-gram, prompt lookup, suffix), the coverage on repetitive-task rows against chat rows.
"""

from __future__ import annotations

import re

import numpy as np

from specsim.validation.corpus import load_corpus
from specsim.validation.score import score
from specsim.validation.spread import coverage

REPETITIVE = re.compile(r"cnn|summ|instructcoder|code.?edit|blazedit|rag|swe|agent|natural-questions")
CHAT = re.compile(r"mt-bench|sharegpt|magpie|alpaca|chat")


def main() -> None:
    rows = score(crossovers=False).rows
    rows = rows[rows["error"].notna()]
    for mode in ("measured", "priors"):
        r = rows[rows["mode"] == mode]
        c = coverage(*(r[x].to_numpy(float) for x in ("published", "predicted", "speedup_low", "speedup_high")))
        print(f"speedup, {mode}: {c.inside:.1%} of {c.n} inside ({c.above:.1%} above, {c.below:.1%} below); median "
              f"half-width {c.half_width:.1%} (a constant band as often right: {c.constant_half_width:.1%})")
    t = rows[(rows["mode"] == "priors") & rows["acceptance_length"].notna()]
    c = coverage(*(t[x].to_numpy(float) for x in ("acceptance_length", "tokens_per_step", "tps_low", "tps_high")))
    print(f"tokens per step, priors: {c.inside:.1%} of {c.n} inside ({c.above:.1%} above, {c.below:.1%} below); "
          f"median half-width {c.half_width:.1%} (constant: {c.constant_half_width:.1%})")
    p = rows[rows["mode"] == "priors"].copy()
    p["dataset"] = load_corpus().set_index("id").loc[p["id"], "dataset"].astype(str).str.lower().to_numpy()
    look = p[p["draft"].str.contains("ngram|suffix|lookup", case=False, na=False)]
    for name, pattern in (("repetitive", REPETITIVE), ("chat", CHAT)):
        part = look[look["dataset"].str.contains(pattern)]
        inside = (part["published"] >= part["speedup_low"]) & (part["published"] <= part["speedup_high"])
        print(f"n-gram / lookup / suffix speedups, {name} tasks: {np.mean(inside):.1%} of {len(part)} inside")


if __name__ == "__main__":
    main()

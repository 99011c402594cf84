"""Fit the engine figures no source states, on named groups of published rows (not part of the test run).

    python benchmarks/fit_engines.py

Each fit names its engine profile, the figures it fits and the corpus groups it uses (in-sample); every
other group checks it. The printed values are what specsim/engines/data/*.yaml carry, with this command
as their source; specsim/validation/data/fits.yaml records the fit groups so that `specsim validate
--published` marks them "fit".
"""

from __future__ import annotations

from specsim.validation.fit import fit_engine

FITS = (
    # SGLang 0.4.4's EAGLE worker (EAGLE-3 paper, Table 3): per-request host work of a step, exposed in the
    # non-overlapped speculative step, and the speculative step's fixed host work
    ("sglang-0.4", ("per_seq_host_us", "spec_per_seq_host_us", "spec_step_host_us"), ("eagle3-sglang-h100",)),
    # vLLM V1 0.10 (SpecDecode-Bench, H100): an eager drafter's per-pass host work and per-request work
    ("vllm-0.10", ("draft_pass_overhead_us", "spec_per_seq_host_us"), ("specdecode-bench-vllm-h100",)),
)


def main() -> None:
    for engine, params, groups in FITS:
        f = fit_engine(engine, params, groups)
        values = ", ".join(f"{k} = {v:.0f}" for k, v in f.values.items())
        print(f"{engine}: {values}  (fitted on {', '.join(groups)}: {f.n_rows} rows, median |error| "
              f"{f.median_abs_error_before:.1%} -> {f.median_abs_error_after:.1%}, priors mode)")


if __name__ == "__main__":
    main()

"""Commands about one speculative configuration: ``evaluate`` and ``validate``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import numpy as np
import typer

from specsim.acceptance.chain import MEAN_LENGTH_CONVENTION
from specsim.cli._format import (
    check_format,
    emit,
    emit_mapping,
    parse_float_list,
    print_json,
    print_kv_table,
    print_rows_table,
)
from specsim.cli._options import Fmt, fields_command
from specsim.cli.main import app
from specsim.errors import EXIT_CHECK_FAILED, SpecsimError
from specsim.fields import FIELDS, Given

if TYPE_CHECKING:
    from specsim.advise.evaluate import RatioStep, RealStep


def _render(r: RatioStep | RealStep, g: Given, fmt: str) -> None:
    """The answer: the question as asked, the step's figures and the echo of what was priced (advise/answer.py),
    as a flat mapping in `fmt`, or a (quantity, value) table whose rows name what was priced."""
    from specsim.advise.answer import ECHO, METRICS, TEXT, asked, notes, record
    from specsim.advise.evaluate import RealStep

    rec = record(r)
    if fmt != "table":
        emit_mapping({**asked(g), **rec, **notes(r)}, fmt)
        return
    rows: list[tuple[str, object]] = [(key, _with_band(rec, key)) for key in METRICS]
    if isinstance(r, RealStep):
        rows.append(("memory per GPU (GiB)", f"{r.memory_gib:.1f} of {r.capacity_gib:.1f}"))
        if r.expected_k is not None:
            rows.append(("drafts verified per step", f"{r.expected_k:.2f} of {r.k} (adaptive)"))
    source, prior = _prior_id(str(rec["acceptance_source"]))
    rows += [(key.removeprefix("priced_").replace("_", " "), source if key == "acceptance_source" else rec[key])
             for key in ECHO if key in TEXT and rec[key] is not None]
    if rec["table_share"] is not None:
        rows.append(("verify pass from tables", f"{rec['table_share']:.0%}"))
    what = f"{r.model} on {r.where}" if isinstance(r, RealStep) else "abstract cost model"
    # the rows above name what was priced; the cost line is in -f json (cost_source); a prior's id (too long for a
    # cell at 80 columns) on a line of its own
    band = BAND_NOTE if rec.get("speedup_low") is not None else ""
    band += f"{r.verify_path}\n" if isinstance(r, RealStep) and r.verify_path else ""
    print_kv_table(f"speculative step ({what}), batch {r.batch}, context {r.context}", rows,
                   note=(f"prior: {prior}\n" if prior else "") + band + f"tokens_per_step: {MEAN_LENGTH_CONVENTION}")


BAND_NOTE = ("[low-high]: the 80% band, from the acceptance's band and the engine's measured cost spread; with the "
             "acceptance given the speedup's leans low by the cost model's measured bias (validate --published says "
             "how often it holds)\n")


def _with_band(rec: dict[str, object], key: str) -> object:
    """A figure with its 80% band in brackets, where it has one."""
    lo, hi, value = rec.get(f"{key}_low"), rec.get(f"{key}_high"), rec[key]
    if not isinstance(lo, float) or not isinstance(hi, float) or not isinstance(value, float) or lo == hi:
        return value
    return f"{_num(value, 4)} [{_num(lo, 3)}-{_num(hi, 3)}]"


def _num(x: float, digits: int) -> str:
    return f"{x:,.0f}" if abs(x) >= 10 ** (digits - 1) else f"{x:.{digits}g}"


def _prior_id(source: str) -> tuple[str, str]:
    """(an acceptance source without its prior's id, the id): 'prior ID (central); ...' -> 'prior (central);
    ...', 'ID'; any other source as it is, ''."""
    if not source.startswith("prior "):
        return source, ""
    _, entry, rest = source.split(" ", 2) if source.count(" ") >= 2 else (*source.split(" ", 1), "")
    return f"prior {rest}".strip(), entry


_Grid = Annotated[Path | None, typer.Option(
    "--grid", help="CSV with one question per row, its columns named as these options (tp, weight_dtype, ...); "
                   "adds the answers")]
_Output = Annotated[Path | None, typer.Option("--output", "-o", help="with --grid: CSV to write")]


@app.command()
@fields_command("evaluate")
def evaluate(given: Given, grid: _Grid = None, output: _Output = None, fmt: Fmt = "table") -> None:
    """Tokens per step, step time, throughput and speedup of one speculative configuration.

    With --draft-cost-ratio C (the seed chapter's model) a target step costs T = --target-step-ms
    (default 1, so every time reads as a multiple of T), a draft step C x T, and verification one
    target step (growing past --ridge-tokens if given). speedup is against plain decoding at the
    same batch; tokens_per_step includes the bonus token.
    """
    check_format(fmt)
    if grid is not None:
        if given.typed:
            raise SpecsimError(f"{FIELDS[sorted(given.typed)[0]].flag} with --grid: give it as the grid's column "
                               "(every row is one question)")
        from specsim.cli.published import run_grid

        sys.exit(run_grid(grid, output, fmt))
    if output is not None:
        raise SpecsimError("--output applies to --grid only")
    from specsim.advise.evaluate import evaluate_step
    from specsim.advise.request import evaluate_request

    _render(evaluate_step(evaluate_request(given)), given, fmt)


@app.command()
def validate(
    seed: Annotated[int, typer.Option("--seed", help="seed of every random generator")] = 0,
    samples: Annotated[int, typer.Option("--samples", help="Monte-Carlo steps (and sequences) per check")] = 10_000,
    published: Annotated[bool, typer.Option(
        "--published", help="instead: the planner's speedup error against published results, by source group",
    )] = False,
    corpus: Annotated[Path | None, typer.Option(
        "--corpus", help="with --published (or --serving, --long-context): a corpus CSV in "
        "specsim/validation/data/published.csv's (serving.csv's, long_context.csv's) columns")] = None,
    modules: Annotated[bool, typer.Option(
        "--modules", help="instead: the token mixers of 2026 (GDN decode, DSA generation module) against NVIDIA's "
        "module tables (pip install \".[tables]\"), by GPU, framework and batch band")] = False,
    serving: Annotated[bool, typer.Option(
        "--serving", help="instead: the serving simulation against published serving measurements with speculation "
        "off and on (on/off ratios, both arms, crossovers), by source group")] = False,
    long_context: Annotated[bool, typer.Option(
        "--long-context", help="instead: the planner's speedup error against published long-context (KV >= 16k) "
        "speculative results (validation/data/long_context.csv), by source group")] = False,
    fmt: Fmt = "table",
) -> None:
    """Run the exact reference sampler against the formulas on seeded cases and compare; with
    --published, price the project's corpus of published speculative-decoding results (each row naming
    its source) and report the error per source group, with the source's acceptance given and without.

    Exit status 1 if any reference check fails (2: bad input).
    """
    check_format(fmt)
    if sum((published, modules, serving, long_context)) > 1:
        raise SpecsimError("give one of --published, --modules, --serving and --long-context")
    if long_context:
        from specsim.cli.published import run_long_context

        run_long_context(fmt, corpus)
        return
    if serving:
        from specsim.cli.published import run_serving

        run_serving(fmt, corpus)
        return
    if modules:
        from specsim.cli.published import run_modules

        run_modules(fmt)
        return
    if published:
        from specsim.cli.published import run_published

        run_published(fmt, corpus)
        return
    if corpus is not None:
        raise SpecsimError("--corpus applies to --published and --serving only")
    if not 100 <= samples <= 10_000_000:
        raise SpecsimError(f"--samples must be in [100, 10000000], got {samples}")
    if not 0 <= seed < 2**32:
        raise SpecsimError(f"--seed must be in [0, 2**32), got {seed}")
    from rich.console import Console

    from specsim.acceptance.check import run_validation  # scipy and the sampler only when asked for

    # a spinner on stderr while the sampler runs (seconds); stdout stays clean for --format json
    with Console(stderr=True).status(f"sampling {samples:,} speculative steps and sequences per check..."):
        rows = run_validation(seed=seed, n_steps=samples, n_runs=samples)
    failed = sum(not r.passed for r in rows)
    if fmt == "json":
        print_json({"seed": seed, "samples": samples, "failed": failed, "checks": [r.as_dict() for r in rows]})
    elif fmt in ("csv", "markdown"):
        import pandas as pd

        emit(pd.DataFrame([r.as_dict() for r in rows]), fmt, f"reference sampler vs formulas (seed {seed})")
    else:
        print_rows_table(
            f"reference sampler vs formulas (seed {seed}, {samples} samples per check)",
            ["case", "quantity", "formula", "reference", "MC s.e.", "z", "p-value", "pass"],
            [(r.case, r.quantity, r.formula, r.reference, r.std_error, r.z, r.p_value, r.passed) for r in rows],
            text_columns=2,
        )
        print(
            f"{len(rows) - failed}/{len(rows)} checks passed "
            "(tokens/step: |z| < 4; distributions: chi-square p > 1e-3; greedy: exact match)"
        )
    if failed:
        # SystemExit, not typer.Exit: click (standalone_mode=False) returns an Exit's code
        # instead of raising it, and main() would drop it.
        sys.exit(EXIT_CHECK_FAILED)


@app.command()
def beta(
    p: Annotated[str, typer.Option("--p", help="target distribution (or logits) over the vocabulary: 0.6,0.3,0.1")],
    q: Annotated[str, typer.Option("--q", help="draft distribution (or logits), same vocabulary")],
    logits: Annotated[bool, typer.Option("--logits", help="--p/--q are logits, not probabilities")] = False,
    temperature: Annotated[float, typer.Option("--temperature", help="with --logits; 0 = greedy")] = 1.0,
    fmt: Fmt = "table",
) -> None:
    """Acceptance probability of one draft token, beta = sum min(p, q) = 1 - TV(p, q), and the residual."""
    check_format(fmt)
    if not 0 <= temperature < float("inf"):
        raise SpecsimError(f"--temperature must be a finite number >= 0, got {temperature:g}")
    from specsim.acceptance.chain import acceptance_beta, residual_distribution, softmax

    pa = np.asarray(parse_float_list(p, "--p"))
    qa = np.asarray(parse_float_list(q, "--q"))
    if pa.size != qa.size:
        raise SpecsimError(f"--p has {pa.size} entries and --q {qa.size}; they must share the vocabulary")
    if logits:
        pa, qa = softmax(pa, temperature), softmax(qa, temperature)
    b = float(acceptance_beta(pa, qa))
    res = residual_distribution(pa, qa)
    out = {"beta": b, "tv_distance": 1.0 - b, "residual": [float(x) for x in res], "p": pa, "q": qa}
    if fmt != "table":
        emit_mapping(out, fmt)
        return
    print_kv_table(
        "one draft token: acceptance and residual",
        list(out.items()),
        note="seed chapter: accept with min(1, p/q); on rejection sample norm(max(0, p - q))",
    )

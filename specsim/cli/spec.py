"""Commands about one speculative configuration: ``evaluate`` and ``validate``."""

from __future__ import annotations

import sys
from functools import partial
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
from specsim.cli._options import (
    Batch,
    Context,
    CostModel,
    Cp,
    Dp,
    DtypeAlias,
    Ep,
    Fmt,
    KvDtype,
    LayerSplit,
    Pp,
    WeightDtype,
    check_batch_context,
)
from specsim.cli._options import weight_dtype as resolve_weight_dtype
from specsim.cli.main import app
from specsim.cost.layout import make_layout
from specsim.errors import EXIT_CHECK_FAILED, SpecsimError

if TYPE_CHECKING:
    from specsim.advise.evaluate import RatioStep, RealStep, StepResult


def _metric_values(r: StepResult) -> dict[str, float]:
    return {key: float(np.asarray(value)) for key, value in r.metrics.as_dict().items()}


def _note(r: StepResult) -> str:
    return f"{r.cost_source}\ntokens_per_step: {MEAN_LENGTH_CONVENTION}"


def _render_ratio(r: RatioStep, fmt: str) -> None:
    """The ratio route's answer: a (quantity, value) table, or a flat mapping in `fmt`."""
    metrics = _metric_values(r)
    if fmt != "table":
        chain_rates = {} if r.chain_rates is None else {"alpha_per_position": list(r.chain_rates)}
        emit_mapping({**metrics, "k": r.k, "tree_nodes": r.tree.num_nodes, "tree_depth": r.tree.depth,
                      "verify_tokens": r.verify_tokens, "batch": r.batch, "context": r.context,
                      "acceptance": r.acceptance, "cost_source": r.cost_source,
                      "convention": MEAN_LENGTH_CONVENTION, **chain_rates}, fmt)
        return
    shape = f"chain k={r.k}" if r.is_chain else f"tree of {r.tree.num_nodes} nodes, depth {r.tree.depth}"
    rows: list[tuple[str, object]] = list(metrics.items())
    rows += [("verify tokens per pass", r.verify_tokens), ("acceptance", r.acceptance)]
    print_kv_table(f"speculative step: {shape}, batch {r.batch}", rows, note=_note(r))


def _render_real(r: RealStep, fmt: str) -> None:
    """The roofline route's answer, with the memory it needs per GPU."""
    metrics = _metric_values(r)
    if fmt != "table":
        note = {} if r.acceptance_note is None else {"acceptance_note": r.acceptance_note}
        emit_mapping({**metrics, "draft": r.draft, "method": r.method, "engine": r.engine,
                      "acceptance": r.acceptance, **note, "memory_gib_per_gpu": r.memory_gib,
                      "memory_capacity_gib": r.capacity_gib, "fits_memory": r.fits_memory, "k": r.k,
                      "cost_model": r.cost_model, "batch": r.batch, "context": r.context, "tp": r.tp,
                      "gpus": r.gpus, "layout": r.layout, "expected_k": r.expected_k,
                      "cost_source": r.cost_source, "convention": MEAN_LENGTH_CONVENTION}, fmt)
        return
    rows: list[tuple[str, object]] = list(metrics.items())
    rows += [("memory per GPU (GiB)", f"{r.memory_gib:.1f} of {r.capacity_gib:.1f}"), ("acceptance", r.acceptance)]
    if r.layout != f"tp {r.tp}":
        rows.append(("GPUs", f"{r.gpus} ({r.layout})"))
    if r.expected_k is not None:
        rows.append(("drafts verified per step", f"{r.expected_k:.2f} of {r.k} (adaptive)"))
    print_kv_table(f"speculative step: {r.draft} k={r.k}, batch {r.batch}, context {r.context}", rows,
                   note=_note(r))


_Alpha = Annotated[float | None, typer.Option("--alpha", help="i.i.d. acceptance rate in [0, 1]")]
_Alphas = Annotated[
    str | None, typer.Option("--alphas", help="conditional per-position rates a1,a2,.. (Medusa-style decay)")
]
_Acceptance = Annotated[
    Path | None,
    typer.Option(
        "--acceptance",
        help="Prometheus /metrics scrape (vLLM, SGLang, TRT-LLM), histogram CSV or YAML/JSON acceptance file",
    ),
]
_K = Annotated[int | None, typer.Option("--k", help="draft length (tokens drafted per step)")]
_TreeFile = Annotated[
    Path | None, typer.Option("--tree", help="draft tree file: YAML/JSON {parents: [...], acceptance: [[..]]}")
]
_SiblingProbs = Annotated[
    str | None,
    typer.Option("--sibling-probs", help="tree acceptance by sibling rank p1,p2,.. (Sequoia vector), every depth"),
]
_DraftCostRatio = Annotated[
    float | None, typer.Option("--draft-cost-ratio", "-c", help="draft step cost / target step cost (seed's c)")
]
_TargetStepMs = Annotated[
    float,
    typer.Option("--target-step-ms", help="target step time T for --draft-cost-ratio (default 1: times in units of T)"),
]
_RidgeTokens = Annotated[
    float | None,
    typer.Option(
        "--ridge-tokens",
        help="with -c: tokens per pass where the target turns compute-bound "
        "(verification then costs T x tokens / ridge); default: never",
    ),
]
_OverheadMs = Annotated[
    float, typer.Option("--overhead-ms", help="fixed per-step cost of speculation (rejection sampling, KV rollback)")
]
_Hardware = Annotated[str | None, typer.Option("--hardware", "-H", help="hardware profile")]
_Model = Annotated[str | None, typer.Option("--model", "-m", help="target model")]
_Draft = Annotated[
    str | None, typer.Option("--draft", "-d", help="draft method (eagle3, ngram, mtp, ...) or draft model name")
]
_Tp = Annotated[int, typer.Option("--tp", help="target tensor-parallel degree")]
_DraftTp = Annotated[int | None, typer.Option("--draft-tp", help="draft model's TP degree")]
_Topk = Annotated[int | None, typer.Option("--topk", help="EAGLE/Medusa tree expansion per level")]
_AdaptiveStop = Annotated[str | None, typer.Option(
    "--adaptive-stop", help="adaptive draft length up to --k: the drafter's stop signal as RECALL,FALSE_ALARM "
    "(P(stop | the target rejects the draft), P(stop | it accepts))")]
_AdaptiveConvention = Annotated[str, typer.Option(
    "--adaptive-convention", help="with --adaptive-stop: inclusive (the stopping draft is verified: HF "
    "assistant_confidence_threshold) | exclusive (dropped: llama.cpp p_min, DSpark trimming)")]
_NumDraftTokens = Annotated[int | None, typer.Option("--num-draft-tokens", help="tree budget (nodes) with --topk > 1")]
_Engine = Annotated[str, typer.Option("--engine", "-e", help="serving engine: vllm | sglang | trtllm | hf | "
                                      "a version (specsim engines list) or a YAML path")]
_AcceptanceLength = Annotated[float | None, typer.Option(
    "--acceptance-length", help="measured mean acceptance length: tokens per verification step incl. the bonus "
    "token, as vLLM / SGLang print it")]
_Grid = Annotated[Path | None, typer.Option(
    "--grid", help="CSV with one configuration per row, columns named as these flags; adds the outputs")]
_Output = Annotated[Path | None, typer.Option("--output", "-o", help="with --grid: CSV to write")]


def _check_cost_options(real: bool, draft_cost_ratio: float | None, target_step_ms: float,
                        ridge_tokens: float | None, cost_model: str | None) -> None:
    """One cost source: --draft-cost-ratio (its numbers in range) or --hardware/--model/--draft."""
    if real and draft_cost_ratio is not None:
        raise SpecsimError("give either --draft-cost-ratio or --hardware/--model/--draft, not both")
    if not real and draft_cost_ratio is None:
        raise SpecsimError("give a cost source: --draft-cost-ratio C, or --hardware H --model M --draft D")
    if not real and cost_model is not None:
        raise SpecsimError("--cost-model prices a real step: give it with --hardware/--model/--draft")
    if draft_cost_ratio is not None and not 0 <= draft_cost_ratio < float("inf"):
        raise SpecsimError(f"--draft-cost-ratio must be a finite number >= 0, got {draft_cost_ratio:g}")
    if not 0 < target_step_ms < float("inf"):
        raise SpecsimError(f"--target-step-ms must be a finite number > 0, got {target_step_ms:g}")
    if ridge_tokens is not None and not 0 < ridge_tokens < float("inf"):
        raise SpecsimError(f"--ridge-tokens must be > 0, got {ridge_tokens:g}")


@app.command()
def evaluate(
    alpha: _Alpha = None,
    alphas: _Alphas = None,
    acceptance: _Acceptance = None,
    k: _K = None,
    tree: _TreeFile = None,
    sibling_probs: _SiblingProbs = None,
    batch: Batch = 1,
    context: Context = 1024,
    draft_cost_ratio: _DraftCostRatio = None,
    target_step_ms: _TargetStepMs = 1.0,
    ridge_tokens: _RidgeTokens = None,
    overhead_ms: _OverheadMs = 0.0,
    hardware: _Hardware = None,
    model: _Model = None,
    draft: _Draft = None,
    tp: _Tp = 1,
    dp: Dp = 1,
    ep: Ep = 1,
    pp: Pp = 1,
    cp: Cp = 1,
    layer_split: LayerSplit = False,
    draft_tp: _DraftTp = None,
    weight_dtype_: WeightDtype = None,
    kv_dtype: KvDtype = "bf16",
    topk: _Topk = None,
    adaptive_stop: _AdaptiveStop = None,
    adaptive_convention: _AdaptiveConvention = "inclusive",
    num_draft_tokens: _NumDraftTokens = None,
    engine: _Engine = "vllm",
    acceptance_length: _AcceptanceLength = None,
    grid: _Grid = None,
    output: _Output = None,
    cost_model: CostModel = None,
    fmt: Fmt = "table",
    dtype_alias: DtypeAlias = None,
) -> None:
    """Tokens per step, step time, throughput and speedup of one speculative configuration.

    With --draft-cost-ratio C (the seed chapter's model) a target step costs T = --target-step-ms
    (default 1, so every time reads as a multiple of T), a draft step C x T, and verification one
    target step (growing past --ridge-tokens if given). speedup is against plain decoding at the
    same batch; tokens_per_step includes the bonus token.
    """
    check_format(fmt)
    if grid is not None:
        from specsim.cli.published import run_grid

        sys.exit(run_grid(grid, output, fmt))
    if output is not None:
        raise SpecsimError("--output applies to --grid only")
    check_batch_context(batch, context)
    weight_dtype = resolve_weight_dtype(weight_dtype_, dtype_alias)
    if not 0 <= overhead_ms < float("inf"):
        raise SpecsimError(f"--overhead-ms must be >= 0, got {overhead_ms:g}")
    _check_cost_options(any(x is not None for x in (hardware, model, draft)), draft_cost_ratio, target_step_ms,
                        ridge_tokens, cost_model)
    from specsim.advise.evaluate import (
        Acceptance,
        AdaptiveStop,
        EvaluateRequest,
        RatioCost,
        RealCost,
        RealStep,
        evaluate_step,
    )

    cost: RatioCost | RealCost
    if draft_cost_ratio is not None:
        if (dp, ep, pp, cp, layer_split) != (1, 1, 1, 1, False):
            raise SpecsimError("--dp, --ep, --pp, --cp and --layer-split price a real target: give them with "
                               "--hardware/--model/--draft, not --draft-cost-ratio")
        cost = RatioCost(draft_cost_ratio, target_step_ms, ridge_tokens)
    elif hardware and model and draft:
        layout = make_layout(tp, dp, ep, pp, cp, layer_split)
        cost = RealCost(hardware, model, draft, tp, draft_tp, weight_dtype, kv_dtype, topk, num_draft_tokens, engine,
                        cost_model, None if layout.simple else layout)
    else:
        raise SpecsimError("the cost-model route needs all of --hardware, --model and --draft")
    # the lists are parsed when the application reads them (advise.evaluate.FloatList)
    rates = None if alphas is None else partial(parse_float_list, alphas, "--alphas")
    siblings = None if sibling_probs is None else partial(parse_float_list, sibling_probs, "--sibling-probs")
    adaptive = None
    if adaptive_stop is not None:
        if not isinstance(cost, RealCost):
            raise SpecsimError("--adaptive-stop prices a real drafter: give it with --hardware/--model/--draft")
        if adaptive_convention not in ("inclusive", "exclusive"):
            raise SpecsimError(f"--adaptive-convention must be inclusive or exclusive, got {adaptive_convention!r}")
        stop = parse_float_list(adaptive_stop, "--adaptive-stop")
        if len(stop) != 2 or not all(0.0 <= x <= 1.0 for x in stop):
            raise SpecsimError(f"--adaptive-stop needs RECALL,FALSE_ALARM, two rates in [0, 1], got {adaptive_stop!r}")
        adaptive = AdaptiveStop(stop[0], stop[1], adaptive_convention)
    result = evaluate_step(EvaluateRequest(cost, Acceptance(alpha, rates, acceptance, acceptance_length), k, tree,
                                           siblings, batch, context, overhead_ms, adaptive))
    if isinstance(result, RealStep):
        _render_real(result, fmt)
    else:
        _render_ratio(result, fmt)


@app.command()
def validate(
    seed: Annotated[int, typer.Option("--seed", help="seed of every random generator")] = 0,
    samples: Annotated[int, typer.Option("--samples", help="Monte-Carlo steps (and sequences) per check")] = 10_000,
    published: Annotated[bool, typer.Option(
        "--published", help="instead: the planner's speedup error against published results, by source group",
    )] = False,
    corpus: Annotated[Path | None, typer.Option(
        "--corpus", help="with --published (or --serving): a corpus CSV in specsim/validation/data/published.csv's "
        "(serving.csv's) columns")] = None,
    modules: Annotated[bool, typer.Option(
        "--modules", help="instead: the token mixers of 2026 (GDN decode, DSA generation module) against NVIDIA's "
        "module tables (pip install \".[tables]\"), by GPU, framework and batch band")] = False,
    serving: Annotated[bool, typer.Option(
        "--serving", help="instead: the serving simulation against published serving measurements with speculation "
        "off and on (on/off ratios, both arms, crossovers), by source group")] = False,
    fmt: Fmt = "table",
) -> None:
    """Run the exact reference sampler against the formulas on seeded cases and compare; with
    --published, price the project's corpus of published speculative-decoding results (each row naming
    its source) and report the error per source group, with the source's acceptance given and without.

    Exit status 1 if any reference check fails (2: bad input).
    """
    check_format(fmt)
    if sum((published, modules, serving)) > 1:
        raise SpecsimError("give one of --published, --modules and --serving")
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

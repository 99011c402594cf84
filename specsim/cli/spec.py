"""Commands about one speculative configuration: ``evaluate`` and ``validate``."""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from specsim.acceptance.chain import (
    MEAN_LENGTH_CONVENTION,
    AcceptanceProfile,
    alpha_from_mean_tokens,
    check_k,
    check_rates,
)
from specsim.acceptance.metrics import load_acceptance
from specsim.acceptance.trees import Tree, TreeSpec, chain, load_tree, sibling_probs_hazard
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
    DtypeAlias,
    Fmt,
    KvDtype,
    WeightDtype,
    check_batch_context,
)
from specsim.cli._options import weight_dtype as resolve_weight_dtype
from specsim.cli.main import app
from specsim.cost.costmodel import describe as cost_model_label
from specsim.engines.profile import load_engine
from specsim.errors import EXIT_CHECK_FAILED, SpecsimError
from specsim.step.economics import StepMetrics, ratio_step_metrics

ABSTRACT_NOTE = (
    "abstract cost model (seed chapter): target step = T, draft step = c*T, verification = one "
    "target step{ridge}; times in ms with T = {t:g} ms"
)


@dataclass(frozen=True)
class _Config:
    """What `evaluate` resolved from its options."""

    profile: AcceptanceProfile | None
    tree: Tree
    tree_probs: np.ndarray | None
    is_chain: bool


def _profile(
    alpha: float | None, alphas: str | None, acceptance: Path | None, k: int | None
) -> AcceptanceProfile | None:
    given = [x is not None for x in (alpha, alphas, acceptance)]
    if sum(given) > 1:
        raise SpecsimError("give only one of --alpha, --alphas, --acceptance")
    if alpha is not None:
        check_rates(alpha, "--alpha")
        return AcceptanceProfile.from_alpha(alpha)
    if alphas is not None:
        rates = parse_float_list(alphas, "--alphas")
        check_rates(rates, "--alphas")
        return AcceptanceProfile.from_alphas(rates)
    if acceptance is not None:
        return load_acceptance(acceptance, k)
    return None


def _resolve(
    alpha: float | None,
    alphas: str | None,
    acceptance: Path | None,
    k: int | None,
    tree_file: Path | None,
    sibling_probs: str | None,
) -> _Config:
    if k is not None:
        check_k(k, "--k")
    if k is not None and tree_file is not None:
        raise SpecsimError("give either --k (a chain) or --tree FILE, not both")
    profile = _profile(alpha, alphas, acceptance, k)
    if tree_file is not None:
        spec: TreeSpec = load_tree(tree_file)
        probs = spec.probs
        if probs is None and sibling_probs is not None:
            probs = np.asarray(parse_float_list(sibling_probs, "--sibling-probs"))
        if probs is None:
            if profile is None:
                raise SpecsimError(
                    "a tree needs acceptance: an 'acceptance' table in the tree file, "
                    "--sibling-probs, or --alpha/--alphas/--acceptance"
                )
            depth_rates = profile.rates_for(max(spec.tree.depth, 1))
            probs = sibling_probs_hazard(depth_rates, int(spec.tree.ranks.max(initial=0)) + 1)
        return _Config(profile, spec.tree, probs, False)
    if sibling_probs is not None:
        raise SpecsimError("--sibling-probs applies to --tree only")
    if profile is None:
        raise SpecsimError("give the acceptance: --alpha A, --alphas a1,a2,.. or --acceptance FILE")
    if k is None:
        if profile.max_k is None:
            raise SpecsimError("give the draft length --k K (or a --tree FILE)")
        k = profile.max_k
    return _Config(profile, chain(k), None, True)


def _real_cost_route(
    hardware: str,
    model: str,
    draft: str,
    profile: AcceptanceProfile | None,
    k: int | None,
    tree_file: Path | None,
    sibling_probs: str | None,
    batch: int,
    context: int,
    overhead_time_s: float,
    setup: dict[str, Any],
) -> tuple[StepMetrics, str, dict[str, Any]]:
    """The roofline cost route: the same `speculate.config_metrics` that `specsim plan` uses.

    --draft is a method (eagle3, ngram, mtp, medusa, lookahead, ...) or a catalogue model (a draft
    model). Without --alpha/--alphas/--acceptance the draft's published prior is used.
    """
    from specsim.cost.hardware import load_hardware
    from specsim.cost.model import load_model
    from specsim.drafts.build import make_draft
    from specsim.step.evaluate import Target, bundled_engine, config_metrics, memory_per_gpu

    hw = load_hardware(hardware)
    if setup.get("cost_model") is not None:
        hw = hw.with_cost_model(setup["cost_model"])
    target = Target(hw, load_model(model), setup["tp"], setup["weight_dtype"],
                    setup["kv_dtype"], engine=bundled_engine(setup["engine"]) if "/" not in setup["engine"]
                    and not setup["engine"].endswith((".yaml", ".yml")) else load_engine(setup["engine"]))
    target.model.check_tp(setup["tp"], "--tp")
    spec: dict[str, Any] = {"method": draft}
    for key in ("draft_tp", "topk", "num_draft_tokens"):
        if setup.get(key) is not None:
            spec[key] = setup[key]
    d = make_draft(spec, target.model, "--draft")
    if profile is not None:
        d = dataclasses.replace(d, acceptance=profile)
    tokens = verify_q = None
    if tree_file is not None:
        if k is not None:
            raise SpecsimError("give either --k (a chain) or --tree FILE, not both")
        tspec = load_tree(tree_file)
        probs = tspec.probs
        if probs is None and sibling_probs is not None:
            probs = np.asarray(parse_float_list(sibling_probs, "--sibling-probs"))
        if probs is None:
            ranks = int(tspec.tree.ranks.max(initial=0)) + 1
            probs = sibling_probs_hazard(d.rates(max(tspec.tree.depth, 1)), ranks)
        tokens = float(tspec.tree.expected_tokens(probs))
        verify_q = float(tspec.tree.num_verify_tokens)
        k = tspec.tree.depth
    if k is None:
        raise SpecsimError("give the draft length --k K (or a --tree FILE)")
    check_k(k, "--k")
    tau = setup.get("acceptance_length")
    if tau is not None:
        if tree_file is not None:
            raise SpecsimError("give either --acceptance-length or a --tree's acceptance, not both")
        q = float(d.verify_tokens_per_seq(k)) if k else 1.0
        if not 1.0 <= tau <= q:
            raise SpecsimError(f"--acceptance-length must lie in [1, {q:g}] at this draft shape (tokens per "
                               f"verification step including the bonus token), got {tau:g}")
        tokens = tau
    mem = memory_per_gpu(target, d, k, batch, context)
    if not bool(np.all(mem.fits)):
        gib = mem.to_dict()
        base = memory_per_gpu(target, make_draft("none", target.model), 0, batch, context)
        why = ("even without speculation" if not bool(np.all(base.fits))
               else f"with {d.label} at k={k} (plain decoding needs {float(base.total) / 2**30:.1f} GiB)")
        need, cap = float(gib["total_gib"]), float(gib["capacity_gib"])
        raise SpecsimError(f"does not fit: {need:.1f} GiB needed of {cap:.1f} GiB per GPU for {target.model.name} "
                           f"on {setup['tp']}x {target.hardware.name} at batch {batch}, context {context}, "
                           f"{setup['weight_dtype']} weights, {why}; lower --batch or --context, raise --tp, or use "
                           "--weight-dtype fp8 / --kv-dtype fp8")
    m = config_metrics(target, d, k, batch, context, tokens_per_step=tokens, verify_tokens_per_seq=verify_q,
                       extra_overhead_s=overhead_time_s)
    info = {"draft": d.label, "method": d.method, "engine": target.engine.name,
            "acceptance": "measured acceptance length" if tau is not None else d.acceptance.source,
            **({"acceptance_note": d.acceptance.note} if d.acceptance.note and tau is None else {}),
            "memory_gib_per_gpu": float(mem.total) / 2**30, "memory_capacity_gib": float(mem.capacity) / 2**30,
            "fits_memory": bool(mem.fits),
            "k": k, "cost_model": cost_model_label(target.hardware)}
    note = (f"{cost_model_label(target.hardware)} cost model: {target.model.name} on {setup['tp']}x "
            f"{target.hardware.name} as {target.engine.name} runs it, draft {d.label} "
            f"({d.method}), acceptance "
            + ("measured (--acceptance-length)" if tau is not None else d.acceptance.source
               + (f"; {d.acceptance.note}" if d.acceptance.note else "")))
    return m, note, info


@app.command()
def evaluate(
    alpha: Annotated[float | None, typer.Option("--alpha", help="i.i.d. acceptance rate in [0, 1]")] = None,
    alphas: Annotated[
        str | None, typer.Option("--alphas", help="conditional per-position rates a1,a2,.. (Medusa-style decay)")
    ] = None,
    acceptance: Annotated[
        Path | None,
        typer.Option(
            "--acceptance",
            help="Prometheus /metrics scrape (vLLM, SGLang, TRT-LLM), histogram CSV or YAML/JSON acceptance file",
        ),
    ] = None,
    k: Annotated[int | None, typer.Option("--k", help="draft length (tokens drafted per step)")] = None,
    tree: Annotated[
        Path | None, typer.Option("--tree", help="draft tree file: YAML/JSON {parents: [...], acceptance: [[..]]}")
    ] = None,
    sibling_probs: Annotated[
        str | None,
        typer.Option("--sibling-probs", help="tree acceptance by sibling rank p1,p2,.. (Sequoia vector), every depth"),
    ] = None,
    batch: Batch = 1,
    context: Context = 1024,
    draft_cost_ratio: Annotated[
        float | None, typer.Option("--draft-cost-ratio", "-c", help="draft step cost / target step cost (seed's c)")
    ] = None,
    target_step_ms: Annotated[
        float,
        typer.Option(
            "--target-step-ms", help="target step time T for --draft-cost-ratio (default 1: times in units of T)"
        ),
    ] = 1.0,
    ridge_tokens: Annotated[
        float | None,
        typer.Option(
            "--ridge-tokens",
            help="with -c: tokens per pass where the target turns compute-bound "
            "(verification then costs T x tokens / ridge); default: never",
        ),
    ] = None,
    overhead_ms: Annotated[
        float,
        typer.Option("--overhead-ms", help="fixed per-step cost of speculation (rejection sampling, KV rollback)"),
    ] = 0.0,
    hardware: Annotated[str | None, typer.Option("--hardware", "-H", help="hardware profile")] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="target model")] = None,
    draft: Annotated[
        str | None, typer.Option("--draft", "-d", help="draft method (eagle3, ngram, mtp, ...) or draft model name")
    ] = None,
    tp: Annotated[int, typer.Option("--tp", help="target tensor-parallel degree")] = 1,
    draft_tp: Annotated[int | None, typer.Option("--draft-tp", help="draft model's TP degree")] = None,
    weight_dtype_: WeightDtype = None,
    kv_dtype: KvDtype = "bf16",
    topk: Annotated[int | None, typer.Option("--topk", help="EAGLE/Medusa tree expansion per level")] = None,
    num_draft_tokens: Annotated[
        int | None, typer.Option("--num-draft-tokens", help="tree budget (nodes) with --topk > 1")
    ] = None,
    engine: Annotated[str, typer.Option("--engine", "-e", help="serving engine: vllm | sglang | trtllm | hf | "
                                        "a version (specsim engines list) or a YAML path")] = "vllm",
    acceptance_length: Annotated[float | None, typer.Option(
        "--acceptance-length", help="measured mean acceptance length: tokens per verification step incl. the bonus "
        "token, as vLLM / SGLang print it")] = None,
    grid: Annotated[Path | None, typer.Option(
        "--grid", help="CSV with one configuration per row, columns named as these flags; adds the outputs")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="with --grid: CSV to write")] = None,
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
    real = any(x is not None for x in (hardware, model, draft))
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

    if real:
        if not (hardware and model and draft):
            raise SpecsimError("the cost-model route needs all of --hardware, --model and --draft")
        if alpha is not None:
            check_rates(alpha, "--alpha")
        setup = {"tp": tp, "draft_tp": draft_tp, "weight_dtype": weight_dtype, "kv_dtype": kv_dtype, "topk": topk,
                 "num_draft_tokens": num_draft_tokens, "engine": engine, "acceptance_length": acceptance_length,
                 "cost_model": cost_model}
        if acceptance_length is not None and any(x is not None for x in (alpha, alphas, acceptance)):
            raise SpecsimError("give one acceptance: --acceptance-length, --alpha, --alphas or --acceptance")
        profile = _profile(alpha, alphas, acceptance, k)
        metrics, cost_note, extra = _real_cost_route(hardware, model, draft, profile, k, tree, sibling_probs, batch,
                                                     context, overhead_ms / 1e3, setup)
        real_result = {key: float(np.asarray(value)) for key, value in metrics.as_dict().items()}
        real_info = {**extra, "batch": batch, "context": context, "tp": tp, "cost_source": cost_note,
                     "convention": MEAN_LENGTH_CONVENTION}
        if fmt != "table":
            emit_mapping({**real_result, **real_info}, fmt)
            return
        rows: list[tuple[str, Any]] = [(key, value) for key, value in real_result.items()]
        rows += [("memory per GPU (GiB)", f"{extra['memory_gib_per_gpu']:.1f} of {extra['memory_capacity_gib']:.1f}"),
                 ("acceptance", extra["acceptance"])]
        print_kv_table(f"speculative step: {extra['draft']} k={extra['k']}, batch {batch}, context {context}", rows,
                       note=cost_note + "\n" + "tokens_per_step: " + MEAN_LENGTH_CONVENTION)
        return
    if acceptance_length is not None:
        if k is None:
            raise SpecsimError("--acceptance-length needs the draft length --k K")
        if not 1.0 <= acceptance_length <= k + 1:
            raise SpecsimError(f"--acceptance-length must lie in [1, k+1] = [1, {k + 1}], got {acceptance_length:g}")
        alpha = float(alpha_from_mean_tokens(acceptance_length, k)) if k else 0.0
    cfg = _resolve(alpha, alphas, acceptance, k, tree, sibling_probs)
    t = cfg.tree
    if cfg.is_chain:
        assert cfg.profile is not None
        tokens = float(cfg.profile.mean_tokens(t.num_nodes))
    else:
        assert cfg.tree_probs is not None
        tokens = float(t.expected_tokens(cfg.tree_probs))

    assert draft_cost_ratio is not None
    metrics = ratio_step_metrics(
        tokens_per_step=tokens,
        draft_passes=t.depth,
        draft_cost_ratio=draft_cost_ratio,
        batch=batch,
        verify_tokens_per_seq=t.num_verify_tokens,
        target_step_time_s=target_step_ms / 1e3,
        ridge_tokens=ridge_tokens,
        overhead_time_s=overhead_ms / 1e3,
    )
    ridge = "" if ridge_tokens is None else f" up to {ridge_tokens:g} tokens, then x tokens/{ridge_tokens:g}"
    cost_note = ABSTRACT_NOTE.format(ridge=ridge, t=target_step_ms) + f", c = {draft_cost_ratio:g}"

    result: dict[str, Any] = {key: float(np.asarray(value)) for key, value in metrics.as_dict().items()}
    info: dict[str, Any] = {
        "k": t.num_nodes if cfg.is_chain else None,
        "tree_nodes": t.num_nodes,
        "tree_depth": t.depth,
        "verify_tokens": batch * t.num_verify_tokens,
        "batch": batch,
        "context": context,
        "acceptance": cfg.profile.source if cfg.profile is not None else "tree file / --sibling-probs",
        "cost_source": cost_note,
        "convention": MEAN_LENGTH_CONVENTION,
    }
    if cfg.is_chain and cfg.profile is not None:
        info["alpha_per_position"] = [float(a) for a in cfg.profile.rates_for(t.num_nodes)]
    if fmt != "table":
        emit_mapping({**result, **info}, fmt)
        return
    shape = f"chain k={t.num_nodes}" if cfg.is_chain else f"tree of {t.num_nodes} nodes, depth {t.depth}"
    rows = [(key, value) for key, value in result.items()]
    rows += [("verify tokens per pass", info["verify_tokens"]), ("acceptance", info["acceptance"])]
    print_kv_table(
        f"speculative step: {shape}, batch {batch}",
        rows,
        note=f"{cost_note}\ntokens_per_step: {MEAN_LENGTH_CONVENTION}",
    )


@app.command()
def validate(
    seed: Annotated[int, typer.Option("--seed", help="seed of every random generator")] = 0,
    samples: Annotated[int, typer.Option("--samples", help="Monte-Carlo steps (and sequences) per check")] = 10_000,
    published: Annotated[bool, typer.Option(
        "--published", help="instead: the planner's speedup error against published results, by source group",
    )] = False,
    corpus: Annotated[Path | None, typer.Option(
        "--corpus", help="with --published: a corpus CSV in specsim/validation/data/published.csv's columns")] = None,
    fmt: Fmt = "table",
) -> None:
    """Run the exact reference sampler against the formulas on seeded cases and compare; with
    --published, price the project's corpus of published speculative-decoding results (each row naming
    its source) and report the error per source group, with the source's acceptance given and without.

    Exit status 1 if any reference check fails (2: bad input).
    """
    check_format(fmt)
    if published:
        from specsim.cli.published import run_published

        run_published(fmt, corpus)
        return
    if corpus is not None:
        raise SpecsimError("--corpus applies to --published only")
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

"""`specsim fit-runs`: a deployment's benchmark runs (speculation off and on) and its engine's acceptance counters
in, a deployment file out (advise/fit_runs.py), which `evaluate`, `simulate`, `plan` and `report` take as
`--deployment FILE`."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from specsim.cli._format import check_format
from specsim.cli._options import fields_command
from specsim.cli.main import app
from specsim.errors import SpecsimError
from specsim.fields import Given
from specsim.scenario.deployment import Deployment

_RUNS = "Runs"
#: simulate's fields a fit takes: the deployment (the runs set the load and the lengths)
TAKES = ("hardware", "model", "weight_dtype", "kv_dtype", "tp", "dp", "ep", "engine", "draft", "k",
         "acceptance_length", "task", "client", "prompts", "range_ratio", "max_num_seqs")


def _points(files: list[Path], arm: str) -> tuple[list[Any], list[Any]]:
    """Each file's runs as fit points of `arm` (and the runs, for what they carry besides)."""
    from specsim.advise.fit_runs import Point
    from specsim.calibration.runs import read_run

    points, runs = [], []
    for path in files:
        for r in read_run(path):
            rate = None if r.concurrency is not None else r.request_rate
            if rate is not None and not math.isfinite(rate):
                raise SpecsimError(f"{r.path}: neither a concurrency nor a finite request rate: fit-runs fits "
                                   "closed-loop runs (--max-concurrency) or open-loop runs at a rate")
            if r.speculative is not None and r.speculative != (arm == "on"):
                was = "on" if r.speculative else "off"
                raise SpecsimError(f"{r.path}: given as a spec-{arm} run, but its client recorded speculation {was}: "
                                   f"give it with --{was}")
            point = Point(arm, r.concurrency, max(1, round(r.input_len_mean)), max(1, round(r.output_len_mean)),
                          r.output_tok_s, r.tpot_mean_ms, r.num_prompts, "", rate, r.ttft_mean_ms)
            points.append(dataclasses.replace(point, label=f"{Path(r.path).name} ({arm}, {point.load})"))
            runs.append(r)
    return points, runs


def _acceptance(metrics: Path | None, before: Path | None, log: Path | None, runs: list[Any], k: int | None,
                given: float | None) -> tuple[tuple[float, ...], float | None, str]:
    """(conditional rates per position, mean tokens per step, where from): the counters, a server log, or what
    the spec-on client files record; nothing where none is given."""
    from specsim.acceptance.chain import AcceptanceProfile
    from specsim.acceptance.metrics import load_metrics, load_metrics_window

    if before is not None and metrics is None:
        raise SpecsimError("--metrics-before needs --metrics (the scrape after the runs)")
    sources = [n for n, v in (("--acceptance-length", given), ("--metrics", metrics), ("--server-log", log)) if v]
    if len(sources) > 1:
        raise SpecsimError(f"give one acceptance: {' or '.join(sources)}, not both")
    if given is not None:
        return (), float(given), "--acceptance-length"
    if metrics is not None:
        reading = load_metrics_window(before, metrics) if before is not None else load_metrics(metrics)
        prof = reading.profile(k)
        kk = prof.max_k if prof.max_k is not None else int(k or 1)  # the positions measured (an i.i.d. fit: k)
        return tuple(float(a) for a in prof.rates_for(kk)), float(reading.mean_length), str(metrics)
    if log is not None:
        from specsim.calibration.runs import read_server_log

        got = read_server_log(log)
        length, per_pos = got.acceptance_length, got.acceptance_per_position
        rates = tuple(float(a) for a in AcceptanceProfile.from_unconditional(per_pos, str(log)).rates_for(
            len(per_pos))) if per_pos else ()
        return rates, length, str(log)
    lengths = [r.acceptance_length for r in runs if r.acceptance_length]
    if not lengths:
        return (), None, ""
    recorded = [r.acceptance_per_position for r in runs if r.acceptance_per_position]
    n = min((len(p) for p in recorded), default=0)
    mean = tuple(sum(p[i] for p in recorded) / len(recorded) for i in range(n))  # vLLM's unconditional rates
    rates = tuple(float(a) for a in AcceptanceProfile.from_unconditional(mean, "runs").rates_for(n)) if n else ()
    return rates, float(sum(lengths) / len(lengths)), "the spec-on runs' own record"


def _flags(g: Given, runs: list[Any]) -> Any:
    from specsim.advise.benchmark import BenchmarkFlags

    models = sorted({str(r.model_id) for r in runs if r.model_id})
    if len(models) > 1 and not g.given("model"):
        raise SpecsimError(f"the runs asked for {len(models)} models ({', '.join(models[:3])}): one deployment's runs "
                           "ask for one; give --model if they are one model under several names")
    model = g["model"] if g.given("model") else (models[0] if models else None)
    missing = [f for f, v in (("--hardware", g["hardware"]), ("--model", model), ("--draft", g["draft"])) if not v]
    if missing:
        raise SpecsimError(f"fit-runs needs {', '.join(missing)}: the deployment the runs measured")
    return BenchmarkFlags(
        hardware=str(g["hardware"]), model=str(model), drafts=(str(g["draft"]),), tp=g["tp"], dp=g["dp"], ep=g["ep"],
        engine=g["engine"] if g.given("engine") else None, weight_dtype=str(g["weight_dtype"]),
        kv_dtype=str(g["kv_dtype"]), k=g["k"], range_ratio=g["range_ratio"] if g.given("range_ratio") else None,
        client=g["client"] if g.given("client") else None, task=g["task"], prompts=g["prompts"],
        max_num_seqs=g["max_num_seqs"] if g.given("max_num_seqs") else None)


@app.command("fit-runs")
@fields_command("simulate", TAKES)
def fit_runs(
    given: Given,
    off: Annotated[list[Path] | None, typer.Option("--off", rich_help_panel=_RUNS, help=(
        "a benchmark client's output with speculation off (vllm bench serve --save-result JSON, sglang.bench_serving "
        "JSONL, AIPerf profile_export JSON); repeat for each file"))] = None,
    on: Annotated[list[Path] | None, typer.Option("--on", rich_help_panel=_RUNS, help=(
        "the same with speculation on"))] = None,
    metrics: Annotated[Path | None, typer.Option("--metrics", rich_help_panel=_RUNS, help=(
        "the engine's /metrics scrape after the spec-on runs (its speculative counters)"))] = None,
    metrics_before: Annotated[Path | None, typer.Option("--metrics-before", rich_help_panel=_RUNS, help=(
        "the scrape before them (only the runs' window counts)"))] = None,
    server_log: Annotated[Path | None, typer.Option("--server-log", rich_help_panel=_RUNS, help=(
        "the engine's log over the spec-on runs (vLLM's SpecDecoding metrics lines, SGLang's accept len)"))] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="the deployment file to write")] = Path(
        "deployment.yaml"),
    fmt: Annotated[str, typer.Option("--format", "-f", help="table | json")] = "table",
) -> None:
    """Fit a deployment to its own benchmark runs: the engine's per-step host cost and the scale of its decode passes
    (from the spec-off arm at two or more loads), the speculative step's own host cost and verification scale (from
    the spec-on arm, its acceptance counted) or else the acceptance, with their uncertainty and each run's residual.
    Writes a deployment file that evaluate, simulate, plan and report take as --deployment."""
    from specsim.advise.fit_runs import fit_deployment
    from specsim.files import check_target, write_outputs
    from specsim.scenario.deployment import deployment_text

    check_format(fmt, ("table", "json"))
    check_target(output)
    off_pts, off_runs = _points(off or [], "off")
    on_pts, on_runs = _points(on or [], "on")
    flags = _flags(given, off_runs + on_runs)
    counted = {len(r.acceptance_per_position) for r in on_runs if r.acceptance_per_position}
    if flags.k is None and len(counted) == 1:  # vLLM's client saves one acceptance rate per drafted position
        flags = dataclasses.replace(flags, k=counted.pop())
    elif flags.k is not None and counted and counted != {flags.k}:
        raise SpecsimError(f"--k {flags.k}: the spec-on runs counted acceptance at {sorted(counted)} positions "
                           "(their k)")
    acc = given["acceptance_length"] if given.given("acceptance_length") else None
    alphas, tau, source = _acceptance(metrics, metrics_before, server_log, on_runs, flags.k, acc)
    if flags.k is None:
        raise SpecsimError("fit-runs needs --k, the draft length the spec-on runs used (their files do not say it)")
    progress = (lambda m: print(f"fitting: {m}", file=sys.stderr, flush=True)) if fmt == "table" else None
    fit = fit_deployment(flags, off_pts + on_pts, alphas, tau,
                         [str(p) for p in (*(off or []), *(on or []))], progress)
    write_outputs([(output, deployment_text(fit.deployment))])
    _render(fit.deployment, source, output, fmt)


def _render(dep: Deployment, source: str, output: Path, fmt: str) -> None:
    m = dep.mapping()
    if fmt == "json":
        print(json.dumps({**m, "acceptance_from": source, "written": str(output)}, indent=1, default=float))
        return
    c, unc = m["calibration"], m["uncertainty"]

    def sd(name: str) -> str:
        u = unc.get(name) or {}
        if u.get("sd") == 0.0 or u.get("sd_log") == 0.0:
            return " (at the kernels' floor)"
        return f" ± {u['sd']:.2g}" if "sd" in u else f" ± {u['sd_log']:.1%}" if "sd_log" in u else " (held)"

    print(f"deployment fitted to {len(m['residuals'])} runs, beyond the engine's profile:")
    print(f"  host cost per step   {c['host_ms']:+.3f} ms{sd('host_ms')}")
    print(f"  decode passes        x{c['pass_scale']:.3f}{sd('pass_scale')}")
    if "spec_host_ms" in unc:
        print(f"  speculative step     {c['spec_host_ms']:+.3f} ms{sd('spec_host_ms')}")
        print(f"  its verification     x{c['verify_scale']:.3f}{sd('verify_scale')}")
    tau = dep.tokens_per_step()
    if tau is not None:
        print(f"  acceptance           {tau:.2f} tokens/step at k = {dep.question.get('k')} "
              f"({dep.acceptance_source})")
    print(f"  band                 ±{1.2816 * unc['sigma_log']:.0%} (80%) on a predicted figure")
    print(f"{'run':38s} {'tok/s':>9s} {'fitted':>9s} {'TPOT ms':>8s} {'fitted':>8s}")
    for r in m["residuals"]:
        print(f"{str(r['run'])[:38]:38s} {r['output_tok_s']:9.1f} {r['fitted_output_tok_s']:9.1f} "
              f"{r['tpot_mean_ms']:8.2f} {r['fitted_tpot_mean_ms']:8.2f}")
    print(f"written: {output}")
    rates = any(str(r.get("load", "")).startswith("rate") for r in m["residuals"])
    print(f"next: specsim simulate --deployment {output} " + ("--sweep-rates 1,2,4,8" if rates
                                                              else "--concurrency 1,8,32,128"))

"""The simulate command: a scenario's traffic through an iteration-level continuous-batching engine, with
speculation off and on side by side (latency percentiles, throughput, goodput, batch / queue / KV over time,
price), replicas for a target rate, and sweeps over rates x policies x drafts (joblib)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import pandas as pd
import typer

from specsim.cli._format import (
    check_format,
    parse_float_list,
    parse_int_list,
)
from specsim.cli._options import CostModel, Engine, Fmt, WeightDtype, overridden
from specsim.cli.main import app
from specsim.cli.simulate_output import emit_frontier, emit_outcome, emit_sweep, timeseries_frame
from specsim.errors import SpecsimError

if TYPE_CHECKING:
    from specsim.advise.benchmark import BenchmarkFlags, Frontier
    from specsim.advise.simulation import Outcome, Setup
    from specsim.scenario.scenario import Scenario
    from specsim.step.policy import Policy

BACKENDS = ("loky", "dask", "ray")
#: the concurrencies a scenario-free simulate sweeps unless told (InferenceMAX's and ATOM's sweeps run 4-256)
DEFAULT_CONCURRENCY = [1, 4, 16, 64, 256]


@app.command()
def simulate(
    scenario: Annotated[Path | None, typer.Argument(help="scenario YAML (its traffic: and serving: sections); "
                                                         "or none, with -H, -m and --draft")] = None,
    rate: Annotated[float | None, typer.Option("--rate", help="mean arrival rate, requests/s (a rate curve: its "
                                                              "daily mean; a trace: sped up to it)")] = None,
    requests: Annotated[int | None, typer.Option("--requests", "--num-prompts",
                                                 help="requests to simulate (instead of the scenario's; per load "
                                                      "point of a concurrency sweep: default 10 x concurrency)")
                        ] = None,
    duration: Annotated[float | None, typer.Option("--duration", help="or every arrival within this many "
                                                                      "seconds")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="random seed (default: the scenario's traffic.seed)")
                    ] = None,
    policy: Annotated[str | None, typer.Option("--policy", help="speculation: off | k=4 | 1-16:4,17-64:2 | "
                                                                "k=4,off>64 (default: serving.speculation, else "
                                                                "the analytic plan's)")] = None,
    draft: Annotated[str | None, typer.Option("--draft", "-d", help="which of the scenario's drafts (its label; "
                                                                    "default: serving.draft, else the plan's); "
                                                                    "without a scenario the draft method(s): "
                                                                    "eagle3, mtp, ngram, a draft model, ...")] = None,
    compare: Annotated[bool, typer.Option("--compare/--no-compare", help="speculation off and on side by side "
                                                                         "(default), or the policy alone")] = True,
    target_rate: Annotated[float | None, typer.Option("--target-rate", help="replicas needed for this many "
                                                                            "requests/s under serving.slo "
                                                                            "(default: serving.target_rate_rps)")
                           ] = None,
    max_replicas: Annotated[int, typer.Option("--max-replicas", help="largest replica count tried")] = 256,
    sweep_rates: Annotated[str | None, typer.Option("--sweep-rates", help="sweep these rates, e.g. 2,4,8,16 "
                                                                          "(each run steady at that rate)")
                           ] = None,
    concurrency: Annotated[str | None, typer.Option(
        "--concurrency", "--sweep-concurrency",
        help="closed-loop clients (--max-concurrency N --request-rate inf), a list: 1,4,16,64 or 1:256:x2; with "
             "speculation off and on, read as the throughput-interactivity frontier")] = None,
    sweep_policies: Annotated[list[str] | None, typer.Option("--sweep-policies", help="sweep these policies, "
                                                             "separated by ';' (or the option repeated), e.g. "
                                                             "'off;k=2;k=4;1-16:4,17-256:2'")] = None,
    sweep_drafts: Annotated[str | None, typer.Option("--sweep-drafts", help="sweep these drafts (labels, "
                                                                            "comma-separated, or 'all')")] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="parallel simulations in a sweep (-1: every core)")] = -1,
    backend: Annotated[str, typer.Option("--backend", help="joblib backend of a sweep: loky (local processes) | "
                                                           "dask | ray (installed separately)")] = "loky",
    timeseries: Annotated[Path | None, typer.Option("--timeseries", help="write batch, queue and KV over time "
                                                                         "to this CSV")] = None,
    plot: Annotated[Path | None, typer.Option("--plot", help="with --concurrency or --sweep-rates: draw the "
                                                             "throughput-interactivity frontier to this PNG")
                    ] = None,
    client: Annotated[str | None, typer.Option("--client", help="the benchmark client measured against: vllm | "
                                                                "sglang | atom (ITL per chunk or per token, range "
                                                                "ratio semantics); default: the engine's own")
                      ] = None,
    hardware: Annotated[str | None, typer.Option("--hardware", "-H", help="without a scenario: hardware profile")
                        ] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="without a scenario: target model")] = None,
    tp: Annotated[int, typer.Option("--tp", help="without a scenario: tensor-parallel degree")] = 1,
    dp: Annotated[int, typer.Option("--dp", help="without a scenario: data-parallel attention groups of --tp "
                                                 "GPUs (SGLang's --tp 8 --dp 8 is --tp 1 --dp 8 here)")] = 1,
    ep: Annotated[int, typer.Option("--ep", help="without a scenario: expert parallelism")] = 1,
    weight_dtype_: WeightDtype = None,
    kv_dtype: Annotated[str, typer.Option("--kv-dtype", help="without a scenario: KV-cache dtype bf16 | fp8")
                        ] = "bf16",
    k: Annotated[int | None, typer.Option("--k", "-k", help="without a scenario: draft length (default: the "
                                                             "analytic plan's)")] = None,
    input_len: Annotated[int, typer.Option("--input-len", help="without a scenario: prompt tokens "
                                                               "(--random-input-len)")] = 1024,
    output_len: Annotated[int, typer.Option("--output-len", help="without a scenario: output tokens, every one "
                                                                 "generated (--ignore-eos)")] = 1024,
    range_ratio: Annotated[float | None, typer.Option(
        "--range-ratio", help="without a scenario: the client's --random-range-ratio (lengths drawn as --client "
                              "draws them: sglang / atom [r L, L], vllm [(1 - r) L, (1 + r) L]); default fixed")
                           ] = None,
    task: Annotated[str | None, typer.Option("--task", help="without a scenario: the prompts' task, for the "
                                                            "acceptance prior (chat, code, math, ...)")] = None,
    prompts: Annotated[str | None, typer.Option("--prompts", help="without a scenario: what the benchmark sends: "
                                                                  "random | random-chat | a dataset (gsm8k, "
                                                                  "mt-bench, humaneval, ...); sets the prior")] = None,
    acceptance_length: Annotated[float | None, typer.Option(
        "--acceptance-length", help="without a scenario: measured tokens per step at -k (bonus included), "
                                    "instead of the prior")] = None,
    max_num_seqs: Annotated[int | None, typer.Option("--max-num-seqs", help="without a scenario: the engine's "
                                                                            "running-request limit (default: "
                                                                            "256, or the largest concurrency)")
                            ] = None,
    engine: Engine = None,
    cost_model: CostModel = None,
    fmt: Fmt = "table",
) -> None:
    """Simulate serving request by request, with speculation off and on side by side: a scenario's traffic, or
    the question a serving benchmark asks (-H, -m, --draft, --concurrency)."""
    opts = _Options.parse(fmt, backend, jobs, timeseries, sweep_rates, sweep_policies, policy, sweep_drafts,
                          concurrency, plot)
    if scenario is None:
        given = [name for name, v in (("--duration", duration), ("--target-rate", target_rate)) if v is not None]
        if given or not compare:
            raise SpecsimError(f"{', '.join(given) or '--no-compare'} needs a scenario (simulate without one sweeps "
                               "load points with speculation off and on)")
        if rate is not None:  # one open-loop rate: a one-point rate sweep
            if opts.concurrency:
                raise SpecsimError("give --concurrency (closed loop) or --rate (open loop), not both")
            opts = dataclasses.replace(opts, rates=[*(opts.rates or []), float(rate)])
        flags = _benchmark_flags(hardware, model, draft, tp, engine, weight_dtype_, kv_dtype, k, input_len,
                                 output_len, range_ratio, client, task, acceptance_length, max_num_seqs, opts)
        flags = dataclasses.replace(flags, prompts=prompts, dp=dp, ep=ep)
        from specsim.advise.benchmark import benchmark_scenario

        s = overridden(benchmark_scenario(flags), cost_model, None)
        labels = [d.label for d in s.drafts]
        drafts: list[str] | None = labels
        draft, client = labels[0], flags.client_name
        if opts.policy is None and k is not None and not opts.policies:
            from specsim.step.policy import Policy

            opts = dataclasses.replace(opts, policy=Policy.static(k))
    else:
        _no_benchmark_flags(hardware=hardware, model=model, k=k, task=task, prompts=prompts,
                            acceptance_length=acceptance_length,
                            max_num_seqs=max_num_seqs, weight_dtype=weight_dtype_, tp=tp, dp=dp, ep=ep,
                            kv_dtype=kv_dtype,
                            input_len=input_len, output_len=output_len, range_ratio=range_ratio)
        from specsim.scenario.scenario import load_scenario

        s = overridden(load_scenario(scenario), cost_model, engine)  # bad input fails here, before any output
        drafts = opts.drafts_of(s)
    with _progress() as tick:
        tick("resolving the draft and policy")
        if opts.frontier or scenario is None:
            setup, result = _frontier(s, opts, drafts, tick, requests=requests, seed=seed, draft=draft,
                                      client=client)
        else:
            setup, frame, outcome = _run(s, opts, drafts, tick, rate=rate, requests=requests, duration=duration,
                                         seed=seed, draft=draft, compare=compare, target_rate=target_rate,
                                         max_replicas=max_replicas)
    if opts.frontier or scenario is None:
        from specsim.advise.benchmark import prompts_task

        emit_frontier(setup, result, fmt, opts.plot, [n for n in (prompts_task(prompts)[1],) if n])
        return
    if frame is not None:  # printed once the progress bar is gone
        emit_sweep(setup, frame, fmt, opts.rates)
        return
    assert outcome is not None
    if timeseries is not None:
        from specsim.files import Outputs

        with Outputs() as outs:
            timeseries_frame(outcome).to_csv(outs.path(timeseries, "--timeseries"), index=False)
    emit_outcome(outcome, fmt, timeseries)


def _benchmark_flags(hardware: str | None, model: str | None, draft: str | None, tp: int, engine: str | None,
                     weight_dtype: str | None, kv_dtype: str, k: int | None, input_len: int, output_len: int,
                     range_ratio: float | None, client: str | None, task: str | None, acceptance_length: float | None,
                     max_num_seqs: int | None, opts: _Options) -> BenchmarkFlags:
    """The scenario-free form's flags, checked (one line naming what is missing or wrong)."""
    from specsim.advise.benchmark import BenchmarkFlags
    from specsim.cli._options import weight_dtype as resolve_weight_dtype

    missing = [name for name, v in (("--hardware", hardware), ("--model", model), ("--draft", draft)) if not v]
    if missing:
        raise SpecsimError(f"simulate without a scenario needs {', '.join(missing)} (or give a scenario YAML)")
    if opts.timeseries is not None:
        raise SpecsimError("--timeseries needs a scenario (one comparison's time series)")
    if max_num_seqs is not None and not 1 <= max_num_seqs <= 65_536:
        raise SpecsimError(f"--max-num-seqs must be in [1, 65536], got {max_num_seqs}")
    if not 0 < tp <= 64:
        raise SpecsimError(f"--tp must be in [1, 64], got {tp}")
    assert hardware and model and draft
    points = tuple(opts.concurrency or (DEFAULT_CONCURRENCY if not opts.rates else (1,)))
    return BenchmarkFlags(hardware, model, tuple(x.strip() for x in draft.split(",") if x.strip()), tp=tp,
                          engine=engine, weight_dtype=resolve_weight_dtype(weight_dtype, None), kv_dtype=kv_dtype, k=k,
                          input_len=input_len, output_len=output_len, range_ratio=range_ratio, client=client,
                          task=task, acceptance_length=acceptance_length, max_num_seqs=max_num_seqs,
                          concurrency=points)


def _no_benchmark_flags(**given: Any) -> None:
    """A scenario says the model, hardware and traffic: the scenario-free flags given with one are refused."""
    defaults = {"tp": 1, "dp": 1, "ep": 1, "kv_dtype": "bf16", "input_len": 1024, "output_len": 1024}
    extra = [name for name, v in given.items() if v is not None and v != defaults.get(name)]
    if extra:
        names = ", ".join("--" + e.replace("_", "-") for e in extra)
        raise SpecsimError(f"{names}: the scenario says these; edit the scenario, or drop it to simulate from flags")


def _frontier(s: Scenario, opts: _Options, drafts: list[str] | None, tick: Any, *, requests: int | None,
              seed: int | None, draft: str | None, client: str | None) -> tuple[Setup, Frontier]:
    """A load sweep read as the frontier: closed-loop concurrencies (or rates), off and each policy."""
    from specsim.advise.benchmark import ENGINE_CLIENT, frontier
    from specsim.advise.simulation import make_setup

    chosen = opts.policy or (opts.policies[0] if opts.policies else None)
    setup = make_setup(s, seed=seed, policy=chosen, draft=draft or (drafts[0] if drafts else None))
    name = client or ENGINE_CLIENT.get(s.engine.name.split("-")[0], "vllm")
    policies = opts.policies or ([setup.policy] if setup.policy.enabled else None)
    concurrencies = opts.concurrency if opts.concurrency or opts.rates else (
        [setup.traffic.concurrency] if setup.traffic.concurrency is not None else DEFAULT_CONCURRENCY)
    with _backend(opts.backend):
        result = frontier(setup, opts.rates, concurrencies if not opts.rates else None, policies, drafts, name,
                          opts.jobs, requests, progress=lambda done, total: tick("sweep", done, total),
                          joblib_backend=opts.backend != "loky")
    return setup, result


@dataclass(frozen=True)
class _Options:
    """The command's options checked before the scenario is read (bad input: one line, exit 2)."""

    rates: list[float] | None
    policies: list[Policy] | None
    policy: Policy | None
    sweep_drafts: str | None
    jobs: int
    backend: str
    concurrency: list[int] | None = None
    plot: Path | None = None
    timeseries: Path | None = None

    @property
    def sweeping(self) -> bool:
        return bool(self.rates or self.policies or self.sweep_drafts)

    @property
    def frontier(self) -> bool:
        """A load sweep read as the frontier: closed-loop concurrencies, or a plot of a rate sweep."""
        return bool(self.concurrency) or (self.plot is not None and bool(self.rates))

    @classmethod
    def parse(cls, fmt: str, backend: str, jobs: int, timeseries: Path | None, sweep_rates: str | None,
              sweep_policies: list[str] | None, policy: str | None, sweep_drafts: str | None,
              concurrency: str | None = None, plot: Path | None = None) -> _Options:
        from specsim.files import check_target
        from specsim.step.policy import Policy

        check_format(fmt)
        clients = parse_int_list(concurrency, "--concurrency") if concurrency else None
        if clients is not None:
            if sweep_rates:
                raise SpecsimError("give --concurrency (closed loop) or --sweep-rates (open loop), not both")
            if min(clients) < 1 or max(clients) > 100_000:
                raise SpecsimError(f"--concurrency: clients must be in [1, 100000], got {min(clients)}..{max(clients)}")
            clients = sorted(set(clients))
        if plot is not None:
            if not (clients or sweep_rates):
                raise SpecsimError("--plot draws a load sweep: give --concurrency or --sweep-rates")
            if plot.suffix.lower() != ".png":
                raise SpecsimError(f"--plot writes a PNG: give a path ending in .png, got {str(plot)!r}")
            check_target(plot, "--plot")
        if backend not in BACKENDS:
            raise SpecsimError(f"--backend must be one of {' | '.join(BACKENDS)}, got {backend!r}")
        if jobs == 0 or jobs < -1 or jobs > 1024:
            raise SpecsimError(f"--jobs must be -1 (every core) or 1-1024, got {jobs}")
        if timeseries is not None:
            if sweep_rates or sweep_policies or sweep_drafts:
                raise SpecsimError("--timeseries writes one comparison's time series; it does not apply to a sweep")
            check_target(timeseries, "--timeseries")
        return cls(parse_float_list(sweep_rates, "--sweep-rates") if sweep_rates else None,
                   _policies(sweep_policies) if sweep_policies else None,
                   Policy.parse(policy) if policy is not None else None, sweep_drafts, jobs, backend, clients, plot,
                   timeseries)

    def drafts_of(self, s: Scenario) -> list[str] | None:
        """The drafts a sweep runs: the labels given, or every speculating draft for 'all'."""
        if not self.sweep_drafts:
            return None
        drafts = ([d.label for d in s.drafts if d.speculates] if self.sweep_drafts.strip() == "all"
                  else [x.strip() for x in self.sweep_drafts.split(",") if x.strip()])
        if not drafts:
            raise SpecsimError("--sweep-drafts: no draft named")
        return drafts


def _run(s: Scenario, opts: _Options, drafts: list[str] | None, tick: Any, *, rate: float | None,
         requests: int | None, duration: float | None, seed: int | None, draft: str | None, compare: bool,
         target_rate: float | None, max_replicas: int) -> tuple[Setup, pd.DataFrame | None, Outcome | None]:
    """A sweep (its own axes, when given, stand in for the draft and policy: no plan to run) or one comparison."""
    from specsim.advise.simulation import make_setup, run_scenario, sweep_scenario

    chosen = opts.policy
    if opts.sweeping:
        chosen = chosen or (opts.policies[0] if opts.policies else None)
        draft = draft or (drafts[0] if drafts else None)
    setup = make_setup(s, rate=rate, requests=requests, duration_s=duration, seed=seed, policy=chosen, draft=draft)
    if opts.sweeping:
        with _backend(opts.backend):
            frame = sweep_scenario(setup, opts.rates, opts.policies, drafts, opts.jobs,
                                   progress=lambda done, total: tick("sweep", done, total))
        return setup, frame, None
    goal = target_rate if target_rate is not None else setup.limits.target_rate_rps
    return setup, None, run_scenario(setup, compare, goal, max_replicas, progress=tick)


def _policies(values: list[str]) -> list[Policy]:
    from specsim.step.policy import Policy

    items = [x.strip() for v in values for x in v.split(";") if x.strip()]
    if not items:
        raise SpecsimError("--sweep-policies: no policy given")
    return [Policy.parse(x, "--sweep-policies") for x in items]


@contextlib.contextmanager
def _progress() -> Iterator[Any]:
    """A transient progress bar on stderr, only when stderr is a terminal: tick(description[, done, total]);
    without a total the bar pulses (one long simulation), with one it fills (a sweep's simulations). Whether
    it is a terminal is asked of the stream itself, not of rich (which takes FORCE_COLOR or TTY_COMPATIBLE in
    the environment for a terminal), so a redirected or captured stderr gets no progress text."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    stream = sys.stderr
    tty = _isatty(stream)
    err = Console(file=stream, force_terminal=tty)
    with Progress(TextColumn("[bold]simulate[/bold] {task.description:<34}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True, disable=not tty) as bar:
        task = bar.add_task("loading", total=None)

        def tick(step: str, done: int | None = None, total: int | None = None) -> None:
            bar.update(task, description=step, completed=done or 0, total=total)

        yield tick


def _isatty(stream: Any) -> bool:
    """Whether a stream is a terminal (False for one without isatty, or closed)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


@contextlib.contextmanager
def _backend(name: str) -> Iterator[None]:
    """joblib's backend for a sweep: loky (local processes); dask (a distributed.Client: the scheduler in
    DASK_SCHEDULER_ADDRESS, else a local cluster); ray (ray.util.joblib). Dask and Ray are not dependencies."""
    import joblib

    if name == "loky":
        yield
        return
    if name == "dask":
        try:
            from distributed import Client
        except ImportError:
            raise SpecsimError("--backend dask needs Dask's distributed scheduler: pip install 'dask[distributed]'"
                               ) from None
        address = os.environ.get("DASK_SCHEDULER_ADDRESS")
        with Client(address) if address else Client(processes=True) as _client, \
                joblib.parallel_config(backend="dask"):
            yield
        return
    try:
        from ray.util.joblib import register_ray
    except ImportError:
        raise SpecsimError("--backend ray needs Ray: pip install 'ray[default]'") from None
    register_ray()
    with joblib.parallel_config(backend="ray"):
        yield

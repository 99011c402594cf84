"""The simulate command: a scenario's traffic through an iteration-level continuous-batching engine, with
speculation off and on side by side (latency percentiles, throughput, goodput, batch / queue / KV over time,
price), replicas for a target rate, and sweeps over rates x policies x drafts (joblib)."""

from __future__ import annotations

import contextlib
import dataclasses
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
from specsim.cli._options import Fmt, fields_command
from specsim.cli.main import app
from specsim.cli.simulate_output import emit_outcome, timeseries_frame
from specsim.cli.simulate_sweeps import emit_frontier, emit_sweep
from specsim.errors import SpecsimError
from specsim.fields import Given, fields_of
from specsim.simulate.sweep import BACKENDS, parallel_backend

if TYPE_CHECKING:
    from specsim.advise.benchmark import Frontier
    from specsim.advise.simulation import Outcome, Setup
    from specsim.scenario.scenario import Scenario
    from specsim.step.policy import Policy

#: the concurrencies a scenario-free simulate sweeps unless told (InferenceMAX's and ATOM's sweeps run 4-256)
DEFAULT_CONCURRENCY = [1, 4, 16, 64, 256]


_LOAD = "Traffic and policy"
_SWEEP = "Load sweeps"


@app.command()
@fields_command("simulate")
def simulate(
    given: Given,
    ctx: typer.Context,
    scenario: Annotated[Path | None, typer.Argument(help="scenario YAML (its traffic: and serving: sections); "
                                                         "or none, with -H, -m and --draft")] = None,
    compare: Annotated[bool, typer.Option("--compare/--no-compare", help=(
        "speculation off and on side by side (default), or the policy alone"))] = True,
    max_replicas: Annotated[int, typer.Option("--max-replicas", rich_help_panel=_LOAD, help=(
        "largest replica count tried"))] = 256,
    timeseries: Annotated[Path | None, typer.Option("--timeseries", rich_help_panel=_LOAD, help=(
        "write batch, queue and KV over time to this CSV"))] = None,
    sweep_rates: Annotated[str | None, typer.Option("--sweep-rates", rich_help_panel=_SWEEP, help=(
        "sweep these rates, e.g. 2,4,8,16 (each steady at that rate)"))] = None,
    concurrency: Annotated[str | None, typer.Option("--concurrency", rich_help_panel=_SWEEP, help=(
        "closed-loop clients (a benchmark's --max-concurrency N at rate inf), alias --sweep-concurrency: 1,4,16,64 "
        "or 1:256:x2; read as the throughput frontier, off and on"))] = None,
    sweep_concurrency: Annotated[str | None, typer.Option("--sweep-concurrency", hidden=True)] = None,
    sweep_policies: Annotated[list[str] | None, typer.Option("--sweep-policies", metavar="LIST",
                                                             rich_help_panel=_SWEEP, help=(
        "sweep these policies, separated by ';' or the option repeated: 'off;k=2;k=4'"))] = None,
    sweep_drafts: Annotated[str | None, typer.Option("--sweep-drafts", rich_help_panel=_SWEEP, help=(
        "sweep these drafts: labels, comma-separated, or 'all'"))] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", rich_help_panel=_SWEEP, help=(
        "parallel simulations in a sweep (-1: every core)"))] = -1,
    backend: Annotated[str, typer.Option("--backend", rich_help_panel=_SWEEP, help=(
        "a sweep's joblib backend: loky (local processes) | dask | ray (installed apart)"))] = "loky",
    plot: Annotated[Path | None, typer.Option("--plot", rich_help_panel=_SWEEP, help=(
        "with --concurrency or --sweep-rates: draw the frontier (tok/s per GPU against per user) to this "
        "PNG"))] = None,
    fmt: Fmt = "table",
) -> None:
    """Simulate serving request by request, with speculation off and on side by side: a scenario's traffic, or
    the question a serving benchmark asks (-H, -m, --draft, --concurrency). Each field's flag sets the scenario's
    field of the same name (with a scenario: overrides it); a flag that does nothing in the run asked for is
    refused."""
    typed = _given(ctx)
    concurrency = _alias(typed, "concurrency", "sweep_concurrency", concurrency, sweep_concurrency)
    opts = _Options.parse(fmt, backend, jobs, timeseries, sweep_rates, sweep_policies, given["policy"],
                          sweep_drafts, concurrency, plot)
    _check_applies(typed, scenario is not None, opts, compare)
    if scenario is None:  # a fitted deployment's question fills what the flags leave (a file's fields stand)
        from specsim.scenario.deployment import fill

        given = fill(given, "simulate")
    s, draft, drafts = _scenario(scenario, given, opts)
    if scenario is None:
        if given.given("rate"):  # one open-loop rate: a one-point rate sweep
            opts = dataclasses.replace(opts, rates=[float(given["rate"])])
        if opts.policy is None and given.given("k") and not opts.policies:
            from specsim.step.policy import Policy

            opts = dataclasses.replace(opts, policy=Policy.static(int(given["k"])))
    client = _client(given["client"] if given.given("client") else None, s)
    size = _Size(given["rate"], given["requests"], given["duration"], given["seed"])
    with _progress() as tick:
        tick("resolving the draft and policy")
        if opts.frontier or scenario is None:
            setup, result = _frontier(s, opts, drafts, tick, size, draft, client, scenario is None)
        else:
            setup, frame, outcome = _run(s, opts, drafts, tick, size, draft, compare, given["target_rate"],
                                         max_replicas if "max_replicas" in typed else None)
    if opts.frontier or scenario is None:
        from specsim.advise.benchmark import prompts_task

        emit_frontier(setup, result, fmt, opts.plot, [n for n in (prompts_task(given["prompts"])[1],) if n])
        return
    if frame is not None:  # printed once the progress bar is gone
        emit_sweep(setup, frame, fmt, opts.rates, client)
        return
    assert outcome is not None
    if timeseries is not None:
        from specsim.files import Outputs

        with Outputs() as outs:
            timeseries_frame(outcome).to_csv(outs.path(timeseries, "--timeseries"), index=False)
    emit_outcome(outcome, fmt, timeseries, client)


def _scenario(path: Path | None, g: Given, opts: _Options) -> tuple[Scenario, str | None, list[str] | None]:
    """(the scenario the run simulates, the draft it runs, the drafts a sweep runs): the file's with each field
    given written over it, or the benchmark's the flags make (advise/benchmark.benchmark_data)."""
    from specsim.advise.benchmark import benchmark_data, client_of, prompts_task
    from specsim.scenario.overrides import override
    from specsim.scenario.scenario import load_scenario, parse_scenario

    if path is None:
        points = tuple(opts.concurrency or (DEFAULT_CONCURRENCY if not opts.rates else (1,)))
        s = parse_scenario(benchmark_data(g, points), "command line")
        assert s.serving is not None  # the engine's own limits apply unless --max-num-seqs was given
        s = dataclasses.replace(s, serving=dataclasses.replace(s.serving, seqs_given=g.given("max_num_seqs")))
        labels = [d.label for d in s.drafts]
        return s, labels[0], labels
    if not g.typed - {"rate", "requests", "duration", "seed", "policy", "draft", "target_rate", "client"}:
        s = load_scenario(path)  # bad input fails here, before any output
    else:
        from specsim.files import read_yaml_mapping
        from specsim.scenario.where import yaml_lines

        data, text = read_yaml_mapping(path)
        chosen = _draft_index(data, g)
        data = override(data, g, client_of(g) if g.given("client") else "vllm")
        task, _ = prompts_task(g["prompts"], g["task"] if g.given("task") else data.get("task"))
        data = {**data, **({"task": task} if task is not None else {})}
        s = parse_scenario(data, str(path), yaml_lines(text))
        if chosen is not None:  # its label after the flags set its shape (eagle3 -> eagle3:top4x16)
            return s, s.drafts[chosen].label, opts.drafts_of(s)
    return s, g["draft"] if g.given("draft") else None, opts.drafts_of(s)


def _draft_index(data: dict[str, Any], g: Given) -> int | None:
    """Which of a file's drafts --draft names (by its name or method), before the flags reshape it."""
    if not g.given("draft") or not isinstance(data.get("drafts"), list):
        return None
    names = [d.get("name", d.get("method")) if isinstance(d, dict) else d for d in data["drafts"]]
    return names.index(g["draft"]) if g["draft"] in names else None


@dataclass(frozen=True)
class _Size:
    """What the run's traffic is resized to (None: the scenario's own)."""

    rate: float | None
    requests: int | None
    duration: float | None
    seed: int | None


#: The options each kind of run reads besides --format, --seed, --engine and --cost-model (which every run reads);
#: one given where it does nothing is refused (issue 30: nothing ignored).
_BENCHMARK = frozenset(f.name for f in fields_of("simulate")) - {"rate", "requests", "duration", "seed", "policy",
                                                                   "draft", "target_rate", "client"}
_READS = {
    "one comparison": {"rate", "requests", "duration", "policy", "draft", "compare", "target_rate", "max_replicas",
                       "timeseries", "client"},
    "a sweep": {"rate", "requests", "duration", "policy", "draft", "compare", "sweep_rates", "sweep_policies",
                "sweep_drafts", "jobs", "backend", "client"},
    "a frontier": {"requests", "duration", "policy", "draft", "compare", "concurrency", "sweep_rates",
                   "sweep_policies", "sweep_drafts", "jobs", "backend", "plot", "client"},
    "a run without a scenario": {"rate", "requests", "policy", "draft", "compare", "concurrency", "sweep_rates",
                                 "sweep_policies", "jobs", "backend", "plot", "client"},
}
#: Two options that answer the same question differently: give one.
_EITHER = (("rate", "sweep_rates"), ("rate", "concurrency"), ("requests", "duration"), ("duration", "concurrency"),
           ("policy", "sweep_policies"), ("draft", "sweep_drafts"), ("compare", "sweep_policies"),
           ("arrivals", "concurrency"), ("cv", "concurrency"))


def _given(ctx: typer.Context) -> dict[str, str]:
    """The options typed on the command line (or set in the environment), by parameter name, with their flag."""
    out = {}
    for p in ctx.command.params:
        source = ctx.get_parameter_source(p.name) if p.name else None
        typed = source is not None and "DEFAULT" not in source.name  # the command line, the environment or a prompt
        if p.name and p.param_type_name == "option" and typed:
            flags = [o for o in (*p.opts, *p.secondary_opts) if o.startswith("--")]
            # an old spelling (a hidden `field__old` option) counts as its field
            out[p.name.split("__")[0]] = "/".join(flags[:2]) if p.secondary_opts else flags[0]
    return out


def _alias(given: dict[str, str], name: str, alias: str, value: Any, alias_value: Any) -> Any:
    """An option's value given by its name or its alias (both: one line); `given` names it once."""
    if alias not in given:
        return value
    if name in given:
        raise SpecsimError(f"give {given[name]} or {given[alias]}, not both (the same option)")
    given[name] = given.pop(alias)
    return alias_value


def _check_applies(given: dict[str, str], has_scenario: bool, opts: _Options, compare: bool) -> None:
    """One line for options that do nothing in the run asked for, or that contradict each other."""
    for a, b in _EITHER:
        if a in given and b in given:
            raise SpecsimError(f"give {given[a]} or {given[b]}, not both")
    kind = ("a run without a scenario" if not has_scenario else "a frontier" if opts.frontier
            else "a sweep" if opts.sweeping else "one comparison")
    extra = [name for name in given if name not in _READS[kind] | _BENCHMARK | {"fmt", "seed"}]
    if extra:
        used = {"a run without a scenario": "runs of a scenario", "a sweep": "one comparison",
                "a frontier": "one comparison or a sweep", "one comparison": "sweeps"}[kind]
        raise SpecsimError(f"{', '.join(given[n] for n in extra)}: not read by {kind} (only by {used}); drop it")
    if "k" in given and ("policy" in given or "sweep_policies" in given) and "acceptance_length" not in given:
        other = given.get("policy") or given["sweep_policies"]
        raise SpecsimError(f"give -k or {other}, not both (-k runs k=K; with --acceptance-length it is the k measured)")
    if not compare and (opts.frontier or not has_scenario):
        raise SpecsimError("--no-compare: a frontier is read against plain decoding (off), which it runs")


def _frontier(s: Scenario, opts: _Options, drafts: list[str] | None, tick: Any, size: _Size, draft: str | None,
              client: str, scenario_free: bool) -> tuple[Setup, Frontier]:
    """A load sweep read as the frontier: closed-loop concurrencies (or rates), off and each policy; each load point
    sends --requests (a concurrency's default: 10 x clients, at least 20; a rate's: the scenario's traffic, or
    without one RATE_PROMPTS)."""
    from specsim.advise.benchmark import frontier
    from specsim.advise.simulation import make_setup
    from specsim.advise.traffic import RATE_PROMPTS

    chosen = opts.policy or (opts.policies[0] if opts.policies else None)
    setup = make_setup(s, requests=None if scenario_free else size.requests, duration_s=size.duration,
                       seed=size.seed, policy=chosen, draft=draft or (drafts[0] if drafts else None),
                       policy_from="--policy" if opts.policy else "--sweep-policies")
    policies = opts.policies or ([setup.policy] if setup.policy.enabled else None)
    concurrencies = opts.concurrency if opts.concurrency or opts.rates else (
        [setup.traffic.concurrency] if setup.traffic.concurrency is not None else DEFAULT_CONCURRENCY)
    prompts = size.requests
    if prompts is None and opts.rates and scenario_free:
        prompts = RATE_PROMPTS
    with parallel_backend(opts.backend):
        result = frontier(setup, opts.rates, concurrencies if not opts.rates else None, policies, drafts, client,
                          opts.jobs, prompts, progress=lambda done, total: tick("sweep", done, total),
                          joblib_backend=opts.backend != "loky")
    return setup, result


def _client(name: str | None, s: Scenario) -> str:
    """The benchmark client the figures are measured as: the one named, else the engine's own (vLLM's for engines
    without one)."""
    from specsim.advise.benchmark import ENGINE_CLIENT
    from specsim.simulate.client import itl_definition

    out = name or ENGINE_CLIENT.get(s.engine.name.split("-")[0], "vllm")
    itl_definition(out)  # an unknown client: one line
    return out


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


def _run(s: Scenario, opts: _Options, drafts: list[str] | None, tick: Any, size: _Size, draft: str | None,
         compare: bool, target_rate: float | None, max_replicas: int | None
         ) -> tuple[Setup, pd.DataFrame | None, Outcome | None]:
    """A sweep (its own axes, when given, stand in for the draft and policy: no plan to run) or one comparison."""
    from specsim.advise.simulation import make_setup, run_scenario, sweep_scenario

    chosen = opts.policy
    if opts.sweeping:
        chosen = chosen or (opts.policies[0] if opts.policies else None)
        draft = draft or (drafts[0] if drafts else None)
    setup = make_setup(s, rate=size.rate, requests=size.requests, duration_s=size.duration, seed=size.seed,
                       policy=chosen, draft=draft, policy_from="--policy" if opts.policy else "--sweep-policies")
    if opts.sweeping:
        with parallel_backend(opts.backend):
            frame = sweep_scenario(setup, opts.rates, opts.policies, drafts, opts.jobs,
                                   progress=lambda done, total: tick("sweep", done, total), compare=compare)
        return setup, frame, None
    goal = target_rate if target_rate is not None else setup.limits.target_rate_rps
    if goal is None and max_replicas is not None:
        raise SpecsimError("--max-replicas: no target rate to size replicas for (give --target-rate, or "
                           "serving.target_rate_rps in the scenario)")
    return setup, None, run_scenario(setup, compare, goal, 256 if max_replicas is None else max_replicas,
                                     progress=tick)


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

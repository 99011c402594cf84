"""The simulate command: a scenario's traffic through an iteration-level continuous-batching engine, with
speculation off and on side by side (latency percentiles, throughput, goodput, batch / queue / KV over time,
price), replicas for a target rate, and sweeps over rates x policies x drafts (joblib)."""

from __future__ import annotations

import contextlib
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
)
from specsim.cli._options import CostModel, Engine, Fmt, overridden
from specsim.cli.main import app
from specsim.cli.simulate_output import emit_outcome, emit_sweep, timeseries_frame
from specsim.errors import SpecsimError

if TYPE_CHECKING:
    from specsim.advise.simulation import Outcome, Setup
    from specsim.scenario.scenario import Scenario
    from specsim.step.policy import Policy

BACKENDS = ("loky", "dask", "ray")


@app.command()
def simulate(
    scenario: Annotated[Path, typer.Argument(help="scenario YAML (its traffic: and serving: sections)")],
    rate: Annotated[float | None, typer.Option("--rate", help="mean arrival rate, requests/s (a rate curve: its "
                                                              "daily mean; a trace: sped up to it)")] = None,
    requests: Annotated[int | None, typer.Option("--requests", help="requests to simulate (instead of the "
                                                                    "scenario's)")] = None,
    duration: Annotated[float | None, typer.Option("--duration", help="or every arrival within this many "
                                                                      "seconds")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="random seed (default: the scenario's traffic.seed)")
                    ] = None,
    policy: Annotated[str | None, typer.Option("--policy", help="speculation: off | k=4 | 1-16:4,17-64:2 | "
                                                                "k=4,off>64 (default: serving.speculation, else "
                                                                "the analytic plan's)")] = None,
    draft: Annotated[str | None, typer.Option("--draft", help="which of the scenario's drafts (its label; "
                                                              "default: serving.draft, else the plan's)")] = None,
    compare: Annotated[bool, typer.Option("--compare/--no-compare", help="speculation off and on side by side "
                                                                         "(default), or the policy alone")] = True,
    target_rate: Annotated[float | None, typer.Option("--target-rate", help="replicas needed for this many "
                                                                            "requests/s under serving.slo "
                                                                            "(default: serving.target_rate_rps)")
                           ] = None,
    max_replicas: Annotated[int, typer.Option("--max-replicas", help="largest replica count tried")] = 256,
    sweep_rates: Annotated[str | None, typer.Option("--sweep-rates", help="sweep these rates, e.g. 2,4,8,16")
                           ] = None,
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
    engine: Engine = None,
    cost_model: CostModel = None,
    fmt: Fmt = "table",
) -> None:
    """Simulate serving the scenario's traffic request by request, with speculation off and on side by side."""
    from specsim.scenario.scenario import load_scenario

    opts = _Options.parse(fmt, backend, jobs, timeseries, sweep_rates, sweep_policies, policy, sweep_drafts)
    s = overridden(load_scenario(scenario), cost_model, engine)  # bad input fails here, before any progress bar or file
    drafts = opts.drafts_of(s)
    with _progress() as tick:
        tick("resolving the draft and policy")
        setup, frame, outcome = _run(s, opts, drafts, tick, rate=rate, requests=requests, duration=duration,
                                     seed=seed, draft=draft, compare=compare, target_rate=target_rate,
                                     max_replicas=max_replicas)
    if frame is not None:  # printed once the progress bar is gone
        emit_sweep(setup, frame, fmt, opts.rates)
        return
    assert outcome is not None
    if timeseries is not None:
        from specsim.files import Outputs

        with Outputs() as outs:
            timeseries_frame(outcome).to_csv(outs.path(timeseries, "--timeseries"), index=False)
    emit_outcome(outcome, fmt, timeseries)


@dataclass(frozen=True)
class _Options:
    """The command's options checked before the scenario is read (bad input: one line, exit 2)."""

    rates: list[float] | None
    policies: list[Policy] | None
    policy: Policy | None
    sweep_drafts: str | None
    jobs: int
    backend: str

    @property
    def sweeping(self) -> bool:
        return bool(self.rates or self.policies or self.sweep_drafts)

    @classmethod
    def parse(cls, fmt: str, backend: str, jobs: int, timeseries: Path | None, sweep_rates: str | None,
              sweep_policies: list[str] | None, policy: str | None, sweep_drafts: str | None) -> _Options:
        from specsim.files import check_target
        from specsim.step.policy import Policy

        check_format(fmt)
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
                   Policy.parse(policy) if policy is not None else None, sweep_drafts, jobs, backend)

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

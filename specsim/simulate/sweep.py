"""Sweeps of simulations (rates x policies x engine limits x seeds), run in parallel with joblib.

`sweep` builds every case's requests and one StepTable per cost in the calling process (so the planner's
cost objects never have to be pickled), then runs the cases through ``joblib.Parallel``: local processes
by default (loky). Each case carries its own seed, so results do not depend on n_jobs or the backend.
Cases name their cost (`SweepCase.cost`) when a sweep crosses drafts: `sweep(cases, {"eagle3": c1, ...})`.

The same call runs on a cluster through joblib's Dask or Ray backends (neither is a dependency):

    from dask.distributed import Client            # Dask: pip install "dask[distributed]"
    client = Client("tcp://scheduler:8786")
    with joblib.parallel_config(backend="dask"):
        frame = sweep(cases, cost, n_jobs=-1)

    from ray.util.joblib import register_ray        # Ray: pip install "ray[default]"
    register_ray()
    with joblib.parallel_config(backend="ray"):
        frame = sweep(cases, cost, n_jobs=-1)
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import pandas as pd

from specsim.errors import SpecsimError
from specsim.forking import fork_context
from specsim.records import Json, to_record
from specsim.scenario.serving import SLO, EngineConfig, Pricing
from specsim.scenario.traffic import Requests, Traffic, generate_requests
from specsim.scenario.workload import AcceptanceMix
from specsim.simulate.capacity import table_for
from specsim.simulate.cost import StepCost, StepTable
from specsim.simulate.engine import simulate
from specsim.simulate.metrics import ServingMetrics, summarize
from specsim.step.policy import Policy

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

#: joblib backends a sweep runs on: local processes, or a cluster through Dask or Ray (neither is a dependency)
BACKENDS = ("loky", "dask", "ray")


@dataclass(frozen=True)
class SweepCase:
    """One simulation of a sweep; labels become the first columns of its row."""

    traffic: Traffic
    engine: EngineConfig
    acceptance: AcceptanceMix | None = None
    seed: int = 0
    labels: tuple[tuple[str, Json], ...] = ()
    cost: str = ""  # the key of this case's step cost when the sweep is given several (one per draft)


def grid(traffic: Traffic, engine: EngineConfig, acceptance: AcceptanceMix | None = None,
         rates_rps: Iterable[float] | None = None, policies: Iterable[Policy] | None = None,
         max_num_seqs: Iterable[int] | None = None, seeds: Iterable[int] = (0,)) -> list[SweepCase]:
    """The cartesian product of the given axes (an axis left as None keeps the traffic's / engine's value)."""
    rate_axis: list[float | None] = list(rates_rps) if rates_rps is not None else [None]
    policy_axis: list[Policy] = list(policies) if policies is not None else [engine.policy]
    seqs_axis: list[int] = list(max_num_seqs) if max_num_seqs is not None else [engine.max_num_seqs]
    cases = []
    for rate, policy, seqs, seed in itertools.product(rate_axis, policy_axis, seqs_axis, list(seeds)):
        t = traffic if rate is None else traffic.with_rate(rate)
        e = replace(engine, policy=policy, max_num_seqs=seqs)
        labels = (("rate_rps", float(t.mean_rate_rps)), ("policy", policy.label), ("max_num_seqs", seqs),
                  ("seed", seed))
        cases.append(SweepCase(t, e, acceptance, seed, labels))
    return cases


def metrics_row(m: ServingMetrics) -> dict[str, Json]:
    """ServingMetrics flattened to one table row (percentiles as name_p50_s ...; no time series)."""
    row: dict[str, Json] = {}
    for key, value in to_record(m).items():
        if key == "timeseries":
            continue
        if isinstance(value, dict):
            stem = key[:-2] if key.endswith("_s") else key
            row.update({f"{stem}_{p}_s": v for p, v in value.items()})
        else:
            row[key] = value
    return row


def _run_case(case: SweepCase, requests: Requests, table: StepTable, slo: SLO | None,
              pricing: Pricing | None) -> ServingMetrics:
    result = simulate(requests, case.engine, table, case.acceptance, case.seed)
    return summarize(result, slo, pricing, bins=None)


def _row(case: SweepCase, m: ServingMetrics) -> dict[str, Json]:
    """A case's row of a sweep's frame: its labels, then its metrics."""
    return {**dict(case.labels), **metrics_row(m)}


def _prepare(cases: Sequence[SweepCase], cost: StepCost | Mapping[str, StepCost]
             ) -> tuple[dict[tuple[Traffic, int], Requests], dict[str, StepTable]]:
    """Every case's requests and one StepTable per cost key."""
    costs: Mapping[str, StepCost] = cost if isinstance(cost, Mapping) else {c.cost: cost for c in cases}
    missing = sorted({c.cost for c in cases} - set(costs))
    if missing:
        raise SpecsimError(f"sweep: no step cost for {missing[0]!r}")
    made: dict[tuple[Traffic, int], Requests] = {}
    for c in cases:
        if (c.traffic, c.seed) not in made:
            made[(c.traffic, c.seed)] = generate_requests(c.traffic, c.seed)
    tables: dict[str, StepTable] = {}
    for key in dict.fromkeys(c.cost for c in cases):
        mine = [c for c in cases if c.cost == key]
        tables[key] = table_for(costs[key], [c.engine for c in mine],
                                list({id(r): r for r in (made[(c.traffic, c.seed)] for c in mine)}.values()))
    return made, tables


def sweep(cases: Sequence[SweepCase], cost: StepCost | Mapping[str, StepCost], slo: SLO | None = None,
          pricing: Pricing | None = None, n_jobs: int | None = -1,
          progress: Callable[[int], None] | None = None) -> pd.DataFrame:
    """Run every case (in parallel, joblib) and return one row per case, in the cases' order.

    `cost`: one StepCost, or one per `SweepCase.cost` key. `progress(done)` is called as rows arrive."""
    import joblib

    made, tables = _prepare(cases, cost)
    jobs = (joblib.delayed(_run_case)(c, made[(c.traffic, c.seed)], tables[c.cost], slo, pricing) for c in cases)
    rows = []
    for case, m in zip(cases, joblib.Parallel(n_jobs=n_jobs, return_as="generator")(jobs), strict=True):
        rows.append(_row(case, m))
        if progress is not None:
            progress(len(rows))
    return pd.DataFrame(rows)


#: (case, requests, table, slo, pricing) of the sweeps `sweep_many` runs; set before forking, so that workers
#: inherit the step tables and requests instead of unpickling them per case.
_PENDING: list[tuple[SweepCase, Requests, StepTable, SLO | None, Pricing | None]] = []


def _run_pending(i: int) -> ServingMetrics:
    return _run_case(*_PENDING[i])


def sweep_many(sweeps: Sequence[tuple[Sequence[SweepCase], StepCost | Mapping[str, StepCost]]],
               slo: SLO | None = None, pricing: Pricing | None = None, workers: int | None = None
               ) -> list[pd.DataFrame]:
    """Several sweeps (cases, cost) as one batch over forked local workers (`workers`, default the CPUs, at
    most 4), one frame per sweep with the rows `sweep` gives; serially where the platform does not fork or the
    pool fails. Each case carries its seed, so the rows do not depend on the workers."""
    return SweepBatch(sweeps, slo, pricing, workers).frames()


class SweepBatch:
    """`sweep_many` started now and collected later: the cases' requests and step tables are made here, the
    simulations start at once in forked workers (where the platform forks and there is more than one CPU and
    case), so the caller works on while they run; `frames()` waits for the rows (running here whatever the
    pool could not) and stops the workers."""

    def __init__(self, sweeps: Sequence[tuple[Sequence[SweepCase], StepCost | Mapping[str, StepCost]]],
                 slo: SLO | None = None, pricing: Pricing | None = None, workers: int | None = None) -> None:
        import multiprocessing
        import os
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        self.sizes = [len(cases) for cases, _ in sweeps]
        self.jobs: list[tuple[SweepCase, Requests, StepTable, SLO | None, Pricing | None]] = []
        for cases, cost in sweeps:
            made, tables = _prepare(cases, cost)
            self.jobs += [(c, made[(c.traffic, c.seed)], tables[c.cost], slo, pricing) for c in cases]
        self._pool: ProcessPoolExecutor | None = None
        self._futures: list[Future[ServingMetrics]] = []
        n = min(workers or os.cpu_count() or 1, 4, len(self.jobs))
        if n > 1 and "fork" in multiprocessing.get_all_start_methods():
            _PENDING[:] = self.jobs
            try:  # forked workers start at the first submit (all of them) and inherit the jobs
                self._pool = ProcessPoolExecutor(n, mp_context=fork_context())
                self._futures = [self._pool.submit(_run_pending, i) for i in range(len(self.jobs))]
            except (OSError, RuntimeError, BrokenProcessPool):
                self.close()
            finally:
                _PENDING.clear()

    def close(self) -> None:
        """Stop the workers (pending cases are cancelled)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._futures = []

    def frames(self) -> list[pd.DataFrame]:
        """One frame per sweep, the rows in the cases' order."""
        from concurrent.futures.process import BrokenProcessPool

        metrics: list[ServingMetrics] | None = None
        try:
            if self._futures:
                metrics = [f.result() for f in self._futures]
        except (OSError, RuntimeError, BrokenProcessPool):
            metrics = None
        finally:
            self.close()
        if metrics is None:
            metrics = [_run_case(*job) for job in self.jobs]
        rows = [_row(job[0], m) for job, m in zip(self.jobs, metrics, strict=True)]
        frames, start = [], 0
        for size in self.sizes:
            frames.append(pd.DataFrame(rows[start:start + size]))
            start += size
        return frames


@contextlib.contextmanager
def parallel_backend(name: str) -> Iterator[None]:
    """joblib's backend for a sweep (BACKENDS): loky (local processes); dask (a distributed.Client: the scheduler in
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

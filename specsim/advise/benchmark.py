"""The question a serving benchmark asks, answered by simulation: closed-loop clients at each concurrency (or open
loop at each rate), speculation off and on, measured as the client measures it (simulate/client.py); the
throughput-interactivity frontier, where speculation stops paying, and what to run at each load with the engine
configuration for it (simulate/frontier.py).

`benchmark_scenario` builds the scenario from simulate's fields (specsim/fields.py: the deployment as `evaluate`
takes it, and a benchmark client's input / output length, range ratio, prompts), written to their places in a
scenario's mapping and parsed as a file is, so that
``specsim simulate -H h100-sxm -m llama-3.1-8b --draft eagle3 -k 3 --concurrency 1,4,16,64`` needs no file.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from specsim.advise.simulation import Setup, sweep_cases, sweep_scenario
from specsim.advise.traffic import MIN_PROMPTS, PROMPTS_PER_CLIENT, mean_lengths
from specsim.errors import SpecsimError
from specsim.fields import FIELDS, Given, fields_of
from specsim.records import Json
from specsim.scenario.overrides import override
from specsim.scenario.scenario import Scenario, parse_scenario
from specsim.simulate.client import CLIENT_COLUMNS, client_columns, itl_definition
from specsim.simulate.frontier import OFF, Choice, configuration, crossovers, load_column, ratios, recommend
from specsim.simulate.sweep import sweep_many
from specsim.step.policy import Policy

#: What a benchmark's prompts are (`--prompts`): raw random token ids, random ids wrapped in the chat template
#: (ATOM's `--use-chat-template`), or a dataset / task name (its acceptance prior).
RANDOM_PROMPTS = ("random", "random-chat")
#: Said whenever the prompts are random tokens: no acceptance prior was measured on them.
RANDOM_NOTE = ("prompts of random tokens: acceptance from the chat prior (no prior is measured on random tokens); "
               "SPEED-Bench (arXiv:2604.09557) measured random-token prompts overstating speculative throughput "
               "by about 23% against real text, so a benchmark run on them may beat this answer")


def prompts_task(prompts: str | None, task: str | None = None) -> tuple[str | None, str | None]:
    """(the acceptance prior's task, a note) for a benchmark's prompts: a task given wins; random tokens take the
    chat prior with RANDOM_NOTE; a dataset its task (`task_of_dataset`)."""
    from specsim.acceptance.priors import TASKS, task_of_dataset

    if prompts is None:
        return task, None
    text = prompts.strip().lower().removeprefix("dataset:")
    if text in RANDOM_PROMPTS:
        return task or "chat", RANDOM_NOTE
    found = task_of_dataset(text)
    if found is None:
        raise SpecsimError(f"--prompts: {prompts!r} is neither random, random-chat, a task ({', '.join(TASKS)}) "
                           "nor a dataset the priors know")
    return task or found, None


#: each engine's own benchmark client (which measured its published figures), for ITL and range-ratio semantics
ENGINE_CLIENT = {"vllm": "vllm", "sglang": "sglang", "atom": "atom"}
MAX_POINTS = 256


@dataclass(frozen=True)
class BenchmarkFlags:
    """What a scenario-free `simulate` is given, as a typed value for notebooks and the serving validation: the
    fields of `specsim.fields` a benchmark names (`given()` is that question as the command line asks it)."""

    hardware: str
    model: str
    drafts: tuple[str, ...]
    tp: int = 1
    dp: int = 1  # data-parallel attention groups (cost/layout.py)
    ep: int = 1  # expert parallelism
    engine: str | None = None
    weight_dtype: str = "native"  # the checkpoint's own, as the engines load it
    kv_dtype: str = "bf16"
    k: int | None = None
    input_len: int = 1024
    output_len: int = 1024
    range_ratio: float | None = None  # None: fixed lengths
    client: str | None = None
    task: str | None = None
    acceptance_length: float | None = None
    prompts: str | None = None
    max_num_seqs: int | None = None
    concurrency: tuple[int, ...] = (1,)

    @property
    def client_name(self) -> str:
        """The client named, else the engine's own (vLLM's for engines without one)."""
        return client_of(self.given())

    def given(self) -> Given:
        """The fields these flags set (a field at its default, or None, is not given)."""
        defaults = {f.name: f.default for f in fields_of("simulate")}
        values = {name: getattr(self, name) for name in defaults if hasattr(self, name)}
        values["draft"] = ",".join(self.drafts)
        typed = {name for name, v in values.items() if v is not None and v != defaults[name]}
        return Given({**defaults, **{k: v for k, v in values.items() if v is not None}}, frozenset(typed | {"draft"}))


def client_of(g: Given) -> str:
    """The benchmark client named, else the engine's own (vLLM's for engines without one); checked."""
    name = g["client"] if g.given("client") else ENGINE_CLIENT.get(str(g["engine"]).split("-")[0].lower(), "vllm")
    itl_definition(name)  # an unknown client: one line
    return str(name)


def benchmark_data(g: Given, concurrency: Sequence[int] = (1,)) -> dict[str, Any]:
    """The scenario a benchmark's flags ask (module docstring) as a scenario file's mapping: closed-loop clients at
    the first concurrency (a sweep replaces it), fixed lengths (or the client's random ones about them), the
    engine's limits large enough for the largest concurrency (max_num_seqs at least it; vLLM's default 256
    otherwise); then every flag given written to its place (scenario/overrides.py)."""
    missing = [FIELDS[n].flag for n in ("hardware", "model", "draft") if not g.given(n)]
    if missing:
        raise SpecsimError(f"simulate without a scenario needs {', '.join(missing)} (or give a scenario YAML)")
    methods = [m.strip() for m in str(g["draft"]).split(",") if m.strip()]
    if not methods:
        raise SpecsimError("--draft: name the draft to simulate (eagle3, mtp, ngram, a draft model, ...)")
    seqs = int(g["max_num_seqs"]) if g.given("max_num_seqs") else max(256, max(concurrency))
    c0 = int(concurrency[0])
    template: dict[str, Any] = {
        "name": "benchmark", "drafts": [{"method": m} for m in methods], "max_k": max(8, int(g["k"] or 0)),
        "traffic": {"arrivals": {"process": "closed", "concurrency": c0},
                    "num_requests": max(PROMPTS_PER_CLIENT * c0, MIN_PROMPTS),
                    "prompt": {"dist": "fixed", "tokens": int(g["input_len"])},
                    "output": {"dist": "fixed", "tokens": int(g["output_len"])}},
        "serving": {"max_num_seqs": seqs, "max_num_batched_tokens": max(8192, seqs), "speculation": "plan"},
    }
    data = override(template, g, client_of(g), every_draft=True)
    task, _ = prompts_task(g["prompts"], g["task"] if g.given("task") else None)
    if task is not None:
        data["task"] = task
    return data


def benchmark_scenario(f: BenchmarkFlags | Given, concurrency: Sequence[int] | None = None) -> Scenario:
    """The scenario of a benchmark's flags (`benchmark_data`), parsed as a file is."""
    g = f.given() if isinstance(f, BenchmarkFlags) else f
    points = f.concurrency if isinstance(f, BenchmarkFlags) and concurrency is None else (concurrency or (1,))
    s = parse_scenario(benchmark_data(g, points), "command line")
    assert s.serving is not None
    # the engine's own limits apply unless --max-num-seqs was given (max_num_seqs above only sizes the run)
    return dataclasses.replace(s, serving=dataclasses.replace(s.serving, seqs_given=g.given("max_num_seqs")))


@dataclass(frozen=True, eq=False)
class Frontier:
    """A load sweep as benchmarks report it: one row per (configuration, load point) in the client's names,
    the on / off ratios, each configuration's crossover, the recommendation per load range and its engine
    configuration."""

    rows: pd.DataFrame
    ratios: pd.DataFrame
    crossovers: dict[str, float | None]
    choices: list[Choice]
    configs: dict[str, Json]
    client: str
    gpus: int
    load: str
    acceptance_sources: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # load points that completed fewer requests than they sent
    #: each speculating configuration's crossover at its throughput ratio's 80% band's low and high end
    #: (`crossover_bands`): the earliest and the latest load it may stop paying at (None: past the largest)
    crossover_bands: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)


def client_frame(frame: pd.DataFrame, gpus: int, client: str) -> pd.DataFrame:
    """A sweep's frame as the client reports it: configuration and load point, the client's columns, then
    what else the simulation measured."""
    load = load_column(frame)
    cols = client_columns(frame, gpus, client)
    head = pd.DataFrame({"configuration": [configuration(d, p) for d, p in zip(frame["draft"], frame["policy"],
                                                                               strict=True)],
                         load: frame[load].to_numpy()}, index=frame.index)
    rest = frame.drop(columns=[c for c in frame.columns if c in (load, *CLIENT_COLUMNS)])
    return pd.concat([head, cols, rest], axis=1)


def _static_k(config: str) -> int | None:
    """k of a configuration 'DRAFT k=N' (None: another policy)."""
    m = re.fullmatch(r"\S+ k=(\d+)", config)
    return int(m.group(1)) if m else None


def _engine_configs(setup: Setup, choices: Sequence[Choice], load: str) -> dict[str, Json]:
    """The engines' configuration for the recommendation over concurrency (a batch runs at most the clients):
    the chosen k per concurrency range as a schedule over batch, off where plain decoding wins; one draft with
    static k per range only."""
    from specsim.plan.engine_configs import engine_configs

    picks = [c for c in choices if c.configuration != OFF]
    if load != "concurrency" or not picks:
        return {}
    labels = {c.configuration.split(" ", 1)[0] for c in picks}
    d = next((x for x in setup.scenario.drafts if x.label in labels), None)
    if len(labels) > 1 or d is None or any(_static_k(c.configuration) is None for c in picks):
        return {"note": "the recommendation changes draft or runs a schedule within a range: configure each range "
                        "by hand (no engine switches drafts by batch)"}
    ranges: list[tuple[int, int, int]] = []
    for i, c in enumerate(choices):
        lo = 1 if i == 0 else int(choices[i - 1].load_to) + 1
        hi = int(c.load_to) if i < len(choices) - 1 else setup.limits.max_num_seqs
        ranges.append((lo, max(lo, hi), _static_k(c.configuration) or 0))
    policy = Policy.of_ranges(0, ranges)
    s = setup.scenario
    return engine_configs(d.method, policy.as_bands(setup.limits.max_num_seqs).records(),
                          d.model.name if d.model is not None else None, d.draft_tp, hopper_fa3=s.hardware.is_hopper)


def frontier(setup: Setup, rates: Sequence[float] | None = None, concurrencies: Sequence[int] | None = None,
             policies: Sequence[Policy] | None = None, drafts: Sequence[str] | None = None, client: str = "vllm",
             n_jobs: int = 1, num_prompts: int | None = None, progress: Callable[[int, int], None] | None = None,
             margin: float = 0.01, joblib_backend: bool = False) -> Frontier:
    """Sweep the load points with speculation off and on and read the frontier (module docstring); over forked
    local workers (`sweep_many`), or joblib's configured backend (Dask, Ray) with `joblib_backend`."""
    points = list(concurrencies or ()) + list(rates or ())
    if len(points) > MAX_POINTS:
        raise SpecsimError(f"at most {MAX_POINTS} load points, got {len(points)}")
    pol = list(policies) if policies else None
    if pol is not None and all(p.enabled for p in pol):
        pol = [Policy.off(), *pol]  # the frontier is read against plain decoding
    if joblib_backend:
        frame = sweep_scenario(setup, rates, pol, drafts, n_jobs, progress, concurrencies, num_prompts)
    else:  # forked local workers inherit the step tables and requests (nothing pickled per case)
        cases, costs = sweep_cases(setup, rates, pol, drafts, concurrencies, num_prompts)
        workers = None if n_jobs == -1 else n_jobs
        frame = sweep_many([(cases, costs)], setup.slo, setup.pricing, workers)[0]
    notes = _completion_notes(setup, frame)
    gpus = setup.gpus_per_replica
    rows = client_frame(frame, gpus, client)
    load = load_column(rows)
    r = ratios(rows)
    at = rows[["configuration", load]].merge(r, on=["configuration", load], how="left")
    ratio = np.where(rows["configuration"] == OFF, 1.0, at["throughput_ratio"].to_numpy())
    rows.insert(3 + len(CLIENT_COLUMNS), "throughput_ratio", ratio)  # after the clients' columns
    choices = recommend(rows, margin)
    _, sources = setup.mix()
    return Frontier(rows, r, crossovers(rows), choices, _engine_configs(setup, choices, load), client, gpus, load,
                    sources, notes, crossover_bands(setup, rows))


def crossover_bands(setup: Setup, rows: pd.DataFrame) -> dict[str, tuple[float | None, float | None]]:
    """Per speculating configuration with one k: the crossover of its throughput ratio's 80% band's low end and of
    its high end (`simulate.frontier.crossover`), the band from the draft's acceptance band and the engine's (or
    a fitted deployment's) speedup spread, combined as every band is (step/bands.py)."""
    from specsim.simulate.frontier import crossover
    from specsim.step.bands import spread_for, step_bands

    load, engine = load_column(rows), setup.target.engine.name
    spread = spread_for(engine, setup.target.calibration)
    drafts = {d.label: d for d in setup.scenario.drafts}
    out: dict[str, tuple[float | None, float | None]] = {}
    for name, g in rows[rows["configuration"] != OFF].groupby("configuration", sort=False):
        k, d = _static_k(str(name)), drafts.get(str(name).split(" ", 1)[0])
        if k is None or d is None or not d.speculates:
            continue
        tau = g["acceptance_length"].to_numpy(float)
        ends = np.array([d.tau_band(k, float(t), exact=False) for t in tau])
        b = step_bands({"tokens_per_step": tau, "ratio": g["throughput_ratio"].to_numpy(float)}, ends[:, 0],
                       ends[:, 1], engine, spread, banded={"ratio": (1, "speedup")})
        x = g[load].to_numpy(float)
        out[str(name)] = (crossover(x, b.low["ratio"]), crossover(x, b.high["ratio"]))
    return out


def _completion_notes(setup: Setup, frame: pd.DataFrame) -> tuple[str, ...]:
    """What the rows that completed fewer requests than they sent mean (requests longer than the KV cache are
    rejected, `engine.simulate`); SpecsimError when no row completed any: there is no frontier to read."""
    short = frame[frame["completed"] < frame["requests"]]
    if short.empty:
        return ()
    prompt, output = mean_lengths(setup.traffic)
    kv = int(frame["kv_capacity_tokens"].max())
    why = (f"a request's prompt + output (mean {prompt + output:,.0f} tokens) must fit the KV cache ({kv:,} tokens "
           "at most here) with one step's draft tokens")
    if not (frame["completed"] > 0).any():
        raise SpecsimError(f"no load point completed a request: {why}; shorten the requests or give the model more "
                           "memory (more GPUs, fp8 weights or KV)")
    load = load_column(frame)
    points = ", ".join(f"{configuration(d, p)} at {load} {x:g} ({int(c)} of {int(n)})" for d, p, x, c, n in zip(
        short["draft"], short["policy"], short[load], short["completed"], short["requests"], strict=True))
    return (f"requests rejected ({points} completed): {why}",)

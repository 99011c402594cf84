"""The one vocabulary of a question: every field of a configuration, defined once.

A field has one name. It is the grid's column, the scenario's key (or the last part of its path there), the
key of the echo in JSON and CSV, and, with dashes, the flag (``weight_dtype`` -> ``--weight-dtype``). Its type,
unit, bounds, help and the doors that take it are stated here and nowhere else: `evaluate`'s and `simulate`'s
flags (cli/_options.py builds them), the grid's columns (advise/grid.py), the scenario's keys
(scenario/scenario.py), `--help`, and the README's table (tools/readme_figures.py) are all derived from FIELDS.
A name no field claims is refused at every door with the nearest known one.

Doors: ``evaluate`` (its flags, and therefore the grid's columns: a grid row is an `evaluate` question),
``simulate`` (its flags), ``plan`` (an override of a scenario's field on plan, report and sweep). ``scenario``
is the field's place in a scenario file (a dotted path; '' where a scenario does not take it).

Token counts take vLLM's human-readable integers (`human_readable_int`, vllm/engine/arg_utils.py): 2k = 2,000,
2K = 2,048, 1.5m = 1,500,000.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specsim.errors import SpecsimError
from specsim.names import unknown

DOORS = ("evaluate", "simulate", "plan")
#: the groups a command's --help shows its fields under, in this order
GROUPS = ("target", "layout", "engine", "draft", "acceptance", "load", "traffic", "serving", "abstract cost",
          "answer")
MAX_BATCH = 1_000_000
MAX_TOKENS = 1_000_000_000  # a bound on input, not on what fits (the model's window and memory are checked)

_HUMAN = re.compile(r"(\d+(?:\.\d+)?)([kmgKMG]?)")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30}
_TRUE, _FALSE = ("true", "yes", "1", "on"), ("false", "no", "0", "off")


def unknown_names(given: Iterable[str], known: Iterable[str], what: str, listed: str = "") -> SpecsimError | None:
    """The one-line refusal of the first name in `given` no known name claims, with the nearest known ones
    (specsim.names.unknown); None when every name is known. `listed`: where a long list of them is shown."""
    names = list(known)
    bad = [g for g in given if g not in names]
    if not bad:
        return None
    exc = unknown(what, bad[0], names, listing=listed)
    return exc if len(bad) == 1 else SpecsimError(f"{exc} ({len(bad) - 1} more unknown: {', '.join(bad[1:4])})")


def _number(x: float) -> str:
    """A bound or value as a person reads it: 1,000,000 and 0.05, never 1e+06."""
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def parse_tokens(text: Any, name: str) -> int:
    """A whole number, or vLLM's human-readable form (module docstring): 2k, 128K, 1.5m."""
    if isinstance(text, bool):
        raise SpecsimError(f"{name} must be a whole number (or 2k, 128K), got {text!r}")
    if isinstance(text, int):
        return text
    if isinstance(text, float):
        if math.isfinite(text) and text == int(text):
            return int(text)
        raise SpecsimError(f"{name} must be a whole number, got {text:g}")
    m = _HUMAN.fullmatch(str(text).strip())
    if not m:
        raise SpecsimError(f"{name} must be a whole number (or 2k = 2,000, 2K = 2,048), got {str(text)!r}")
    number, suffix = m.groups()
    if suffix in _BINARY and "." in number:  # vLLM refuses decimals with a binary suffix too
        raise SpecsimError(f"{name}: a decimal needs a decimal suffix ({number}{suffix.lower()}), got {text!r}")
    value = float(number) * _DECIMAL.get(suffix, _BINARY.get(suffix, 1))
    if value != int(value):
        raise SpecsimError(f"{name} must be a whole number of tokens, got {text!r}")
    return int(value)


def parse_int(text: Any, name: str) -> int:
    """A whole number (a CSV cell's 3.0 included)."""
    if isinstance(text, bool):
        raise SpecsimError(f"{name} must be a whole number, got {text!r}")
    try:
        f = float(text)
    except (TypeError, ValueError):
        raise SpecsimError(f"{name} must be a whole number, got {str(text)!r}") from None
    if not math.isfinite(f) or f != int(f):
        raise SpecsimError(f"{name} must be a whole number, got {str(text)!r}")
    return int(f)


def parse_float(text: Any, name: str) -> float:
    """A finite number."""
    if isinstance(text, bool):
        raise SpecsimError(f"{name} must be a number, got {text!r}")
    try:
        f = float(text)
    except (TypeError, ValueError):
        raise SpecsimError(f"{name} must be a number, got {str(text)!r}") from None
    if not math.isfinite(f):
        raise SpecsimError(f"{name} must be a finite number, got {str(text)!r}")
    return f


def parse_bool(text: Any, name: str) -> bool:
    """true / false (yes / no, 1 / 0, on / off)."""
    if isinstance(text, bool):
        return text
    word = str(text).strip().lower()
    if word in _TRUE or word == "1.0":
        return True
    if word in _FALSE or word == "0.0":
        return False
    raise SpecsimError(f"{name} must be true or false, got {str(text)!r}")


def parse_str(text: Any, name: str) -> str:
    """A non-empty name."""
    word = str(text).strip()
    if not word:
        raise SpecsimError(f"{name} is empty")
    return word


PARSERS: dict[str, Callable[[Any, str], Any]] = {
    "tokens": parse_tokens, "int": parse_int, "float": parse_float, "bool": parse_bool, "str": parse_str,
    "path": lambda text, name: Path(parse_str(text, name)),
}
METAVARS = {"tokens": "TOKENS", "int": "N", "float": "X", "bool": "", "str": "TEXT", "path": "FILE"}


@dataclass(frozen=True)
class Field:
    """One field of a configuration (module docstring)."""

    name: str
    kind: str  # a key of PARSERS
    group: str  # a GROUPS entry
    help: str
    doors: frozenset[str]
    default: Any = None  # None: not set unless given (the help says what then applies)
    scenario: str = ""  # its dotted path in a scenario file ('' where scenarios do not take it)
    short: str = ""  # a one-letter flag beside --name
    old: tuple[str, ...] = ()  # older spellings, taken as flags and grid columns
    lo: float | None = None  # bounds, checked at every door
    hi: float | None = None
    metavar: str = ""
    unit: str = ""

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def parse(self, value: Any, spelt: str | None = None) -> Any:
        """`value` (a flag's text, a CSV cell, a YAML value) as this field's type, within its bounds."""
        name = spelt or self.flag
        out = PARSERS[self.kind](value, name)
        if isinstance(out, int | float) and not isinstance(out, bool):
            self.check(out, name)
        return out

    def check(self, value: float, spelt: str | None = None) -> None:
        """SpecsimError unless lo <= value <= hi."""
        if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
            lo = "-inf" if self.lo is None else _number(self.lo)
            hi = "inf" if self.hi is None else _number(self.hi)
            raise SpecsimError(f"{spelt or self.flag} must be in [{lo}, {hi}], got {_number(value)}")


def _f(name: str, kind: str, group: str, help: str, doors: str, **kw: Any) -> Field:
    return Field(name, kind, group, help, frozenset(doors.split()), **kw)


_ALL = "evaluate simulate"
_EVERY = "evaluate simulate plan"
FIELDS: dict[str, Field] = {f.name: f for f in (
    # the target: what runs where
    _f("hardware", "str", "target", "GPU profile (specsim hardware list) or a profile YAML", _ALL,
       scenario="hardware", short="-H", metavar="GPU"),
    _f("model", "str", "target", "target model: catalogue name, Hugging Face id, or a config.json", _ALL,
       scenario="model", short="-m", metavar="MODEL"),
    _f("weight_dtype", "str", "target", "weights: native (the checkpoint's own, as engines load it) | bf16 | fp8 "
       "| fp8_block | int8 | int4 | w4a8 | nvfp4 | mxfp4, or per part: fp8,experts=nvfp4", _ALL,
       default="native", scenario="weight_dtype", old=("dtype",), metavar="FORMAT"),
    _f("kv_dtype", "str", "target", "KV-cache dtype: bf16 | fp8", _ALL, default="bf16", scenario="kv_dtype",
       metavar="DTYPE"),
    _f("memory_utilization", "float", "target", "share of each GPU's memory the engine takes (vLLM "
       "--gpu-memory-utilization)", _ALL, default=0.9, scenario="memory_utilization", lo=0.05, hi=1.0),
    # the parallel layout (cost/layout.py)
    _f("tp", "int", "layout", "tensor-parallel degree", _ALL, default=1, scenario="tp", lo=1, hi=1024),
    _f("dp", "int", "layout", "data-parallel attention groups of --tp GPUs (SGLang's --tp 8 --dp 8 is --tp 1 "
       "--dp 8 here)", _ALL, default=1, scenario="dp", lo=1, hi=1024),
    _f("ep", "int", "layout", "expert parallelism over the tp x dp GPUs", _ALL, default=1, scenario="ep", lo=1,
       hi=1024),
    _f("pp", "int", "layout", "pipeline stages", _ALL, default=1, scenario="pp", lo=1, hi=1024),
    _f("cp", "int", "layout", "decode context parallelism: KV split over CP of the tp GPUs", _ALL, default=1,
       scenario="cp", lo=1, hi=1024),
    _f("layer_split", "bool", "layout", "with --pp: one microbatch through the stages, one GPU busy at a time "
       "(Hugging Face device_map)", _ALL, default=False, scenario="layer_split"),
    # the engine and how its passes are priced
    _f("engine", "str", "engine", "serving engine: vllm | sglang | trtllm | atom | hf | a version (specsim "
       "engines list) | a profile YAML", _EVERY, default="vllm", scenario="engine", short="-e", metavar="ENGINE"),
    _f("deployment", "path", "engine", "a fitted deployment (specsim fit-runs): its runs' configuration fills "
       "what is not given, its calibration and measured acceptance price the step", _EVERY,
       scenario="deployment", metavar="FILE"),
    _f("cost_model", "str", "engine", "roofline | table (NVIDIA's measured kernel tables, the roofline outside "
       "them); default: the hardware profile's", _EVERY, scenario="cost_model", metavar="MODEL"),
    # the draft and its shape
    _f("draft", "str", "draft", "draft method (eagle3, mtp, ngram, medusa, ...) or a draft model's name", _ALL,
       scenario="drafts[].method", short="-d", metavar="DRAFT"),
    _f("k", "int", "draft", "draft length: tokens drafted per step", _ALL, scenario="serving.speculation.k",
       short="-k", lo=0, hi=64),
    _f("topk", "int", "draft", "a tree: children per node (EAGLE / Medusa topk)", _ALL, scenario="drafts[].topk",
       lo=1, hi=64),
    _f("num_draft_tokens", "int", "draft", "a tree: nodes verified per step (with --topk > 1)", _ALL,
       scenario="drafts[].num_draft_tokens", lo=1, hi=4096),
    _f("draft_tp", "int", "draft", "a draft model's tensor-parallel degree (default: the target's)", _ALL,
       scenario="drafts[].draft_tp", lo=1, hi=1024),
    _f("window", "int", "draft", "lookahead decoding's window W", _ALL, scenario="drafts[].window", lo=1,
       hi=1024),
    _f("guesses", "int", "draft", "lookahead decoding's guesses G per step", _ALL, scenario="drafts[].guesses",
       lo=1, hi=1024),
    _f("tree", "path", "draft", "a draft tree file: YAML/JSON {parents: [...], acceptance: [[..]]}", "evaluate"),
    _f("adaptive_stop", "str", "draft", "adaptive draft length up to --k: the drafter's stop signal as "
       "RECALL,FALSE_ALARM (P(stop | rejected), P(stop | accepted))", "evaluate", metavar="R,F"),
    _f("adaptive_convention", "str", "draft", "with --adaptive-stop: inclusive (the stopping draft is verified) "
       "| exclusive (dropped)", "evaluate", default="inclusive", metavar="RULE"),
    # acceptance: measured, given, or the sourced prior for a task / temperature / checkpoint
    _f("acceptance_length", "float", "acceptance", "measured tokens per step at --k, the bonus token included (as "
       "vLLM / SGLang print it)", _ALL, scenario="drafts[].acceptance.acceptance_length", old=("tau",), lo=1,
       hi=4097),
    _f("alpha", "float", "acceptance", "i.i.d. acceptance rate per drafted token", "evaluate",
       scenario="drafts[].acceptance.alpha", lo=0, hi=1),
    _f("alphas", "str", "acceptance", "conditional acceptance rate per position a1,a2,...", "evaluate",
       scenario="drafts[].acceptance.alphas", metavar="A1,A2"),
    _f("acceptance", "path", "acceptance", "an engine's /metrics scrape, a histogram CSV, or a YAML/JSON "
       "acceptance file", "evaluate", scenario="drafts[].acceptance.file"),
    _f("sibling_probs", "str", "acceptance", "with --tree: acceptance by sibling rank p1,p2,... at every depth",
       "evaluate", metavar="P1,P2"),
    _f("task", "str", "acceptance", "what the prompts are, for the prior: chat, code, math, summarisation, rag, "
       "...", _ALL, scenario="task", metavar="TASK"),
    _f("temperature", "float", "acceptance", "sampling temperature, for the prior (default: greedy, band to "
       "T=1)", _ALL, scenario="temperature", lo=0, hi=2),
    _f("checkpoint", "str", "acceptance", "the draft head's checkpoint, for its prior", _ALL,
       scenario="drafts[].checkpoint", metavar="NAME"),
    # one step's load
    _f("batch", "tokens", "load", "sequences per step", "evaluate", default=1, scenario="load.buckets[].batch",
       short="-b", lo=1, hi=MAX_BATCH),
    _f("context", "tokens", "load", "KV length each sequence attends to (2k = 2,000; 2K = 2,048)", "evaluate",
       default=1024, scenario="load.buckets[].context", short="-L", lo=0, hi=MAX_TOKENS),
    _f("label", "str", "answer", "a name for the question, carried to the answer as given (not priced)",
       "evaluate", metavar="TEXT"),
    # the seed chapter's abstract cost model instead of a real target
    _f("draft_cost_ratio", "float", "abstract cost", "draft step cost / target step cost (the seed chapter's c)",
       "evaluate", short="-c", lo=0),
    _f("target_step_ms", "float", "abstract cost", "with -c: the target step T (default 1: times in units of T)",
       "evaluate", lo=1e-12, unit="ms"),
    _f("ridge_tokens", "float", "abstract cost", "with -c: tokens per pass where the target turns compute-bound",
       "evaluate", lo=1e-12),
    _f("extra_overhead_ms", "float", "abstract cost", "a fixed cost per speculative step on top of the model's",
       "evaluate", lo=0, unit="ms"),
    # traffic as a benchmark client or production sends it (simulate)
    _f("input_len", "tokens", "traffic", "prompt tokens (vllm bench serve --random-input-len)", "simulate",
       default=1024, scenario="traffic.prompt.tokens", lo=1, hi=MAX_TOKENS),
    _f("output_len", "tokens", "traffic", "output tokens, every one generated (--ignore-eos)", "simulate",
       default=1024, scenario="traffic.output.tokens", lo=1, hi=MAX_TOKENS),
    _f("range_ratio", "float", "traffic", "the client's random range ratio r: lengths drawn as --client draws them "
       "(sglang, atom: r L to L; vllm: (1 - r) L to (1 + r) L); default fixed", "simulate",
       scenario="traffic.prompt.range_ratio", lo=0, hi=1),
    _f("client", "str", "traffic", "benchmark client measured against: vllm | sglang | atom (default: the "
       "engine's)", "simulate", scenario="traffic.prompt.client", metavar="CLIENT"),
    _f("prompts", "str", "traffic", "what the client sends: random | random-chat | a dataset (gsm8k, mt-bench, "
       "...)", "simulate", metavar="PROMPTS"),
    _f("arrivals", "str", "traffic", "arrival process at --rate: poisson | gamma | constant", "simulate",
       default="poisson", scenario="traffic.arrivals.process", metavar="PROCESS"),
    _f("cv", "float", "traffic", "with --arrivals gamma: coefficient of variation of the gaps", "simulate",
       scenario="traffic.arrivals.cv", lo=1e-6, hi=100),
    _f("rate", "float", "traffic", "mean arrival rate, requests/s (open loop)", "simulate",
       scenario="traffic.arrivals.rate_rps", lo=1e-9, unit="req/s"),
    _f("requests", "int", "traffic", "requests to simulate (per load point)", "simulate",
       scenario="traffic.num_requests", old=("num_prompts",), lo=1, hi=10_000_000),
    _f("duration", "float", "traffic", "or every arrival within this many seconds", "simulate",
       scenario="traffic.duration_s", lo=1e-9, unit="s"),
    _f("seed", "int", "traffic", "random seed", "simulate", scenario="traffic.seed", lo=0, hi=2**32 - 1),
    # cached prefixes and agent sessions (simulate/sessions.py)
    _f("cached_fraction", "float", "traffic", "share of each prompt already in the prefix cache when it arrives "
       "(1: a benchmark that warmed it, decode timed alone); whole blocks, the last one recomputed", "simulate",
       scenario="traffic.cached_fraction", lo=0, hi=1),
    _f("turns", "int", "traffic", "turns per session (agent / multi-turn traffic; --requests counts sessions): "
       "each turn's prompt is the context so far plus --turn-input-len, from the prefix cache", "simulate",
       scenario="traffic.sessions.turns", lo=1, hi=10_000),
    _f("turn_input_len", "tokens", "traffic", "new prompt tokens of each later turn (tool results, the user's "
       "message)", "simulate", default=512, scenario="traffic.sessions.turn_input", lo=0, hi=MAX_TOKENS),
    _f("agent", "str", "traffic", "agent sessions drawn from a sourced profile (turns, appended tokens, outputs, "
       "gaps): coding-agent | mooncake-conversation | vllm-multi-turn-bench; --requests counts sessions", "simulate",
       scenario="traffic.sessions.profile", metavar="PROFILE"),
    _f("think", "float", "traffic", "seconds between a turn's finish and the next turn's send (tool calls, the "
       "user)", "simulate", default=0.0, scenario="traffic.sessions.think_s", lo=0, hi=86_400, unit="s"),
    # the engine's serving limits and policy (simulate)
    _f("max_num_seqs", "int", "serving", "the engine's running-request limit (default: 256, or the largest "
       "concurrency)", "simulate", scenario="serving.max_num_seqs", lo=1, hi=4096),
    _f("policy", "str", "serving", "speculation: off | k=4 | 1-16:4,17-64:2 | k=4,off>64 (default: the plan's)",
       "simulate", scenario="serving.speculation", metavar="POLICY"),
    _f("target_rate", "float", "serving", "replicas needed for this many requests/s under the SLO", "simulate",
       scenario="serving.target_rate_rps", lo=1e-9, unit="req/s"),
    _f("kv_block", "int", "serving", "prefix-cache block, tokens (default: the engine's: vLLM 16, 64 with an MLA "
       "target; SGLang 1; TensorRT-LLM 32)", "simulate", scenario="serving.kv_cache.block_tokens", lo=1, hi=4096),
    _f("kv_offload", "float", "serving", "host memory for KV per replica, GB (CPU offload / LMCache): cached "
       "prefixes evicted from the GPU wait there and reload on a hit", "simulate",
       scenario="serving.kv_cache.offload_gb", lo=0, hi=1e6, unit="GB"),
    _f("host_bw", "float", "serving", "host-to-GPU bandwidth per GPU for KV reloads, GB/s (default: measured for "
       "the GPU)", "simulate", scenario="serving.kv_cache.host_gb_per_s", lo=1e-3, hi=1e5, unit="GB/s"),
)}


def fields_of(door: str) -> list[Field]:
    """The fields a door takes, in FIELDS' order."""
    return [f for f in FIELDS.values() if door in f.doors]


def spelling(door: str) -> dict[str, str]:
    """Every spelling a door's CSV columns or scenario keys may use (name and old names) -> the field's name."""
    out: dict[str, str] = {}
    for f in fields_of(door):
        out[f.name] = f.name
        out.update({o: f.name for o in f.old})
    return out


@dataclass(frozen=True)
class Given:
    """The values of a door's fields (defaults filled) and which of them the user gave, with how to spell a
    field in a message at that door (`--tp` for a flag, `tp` for a grid column)."""

    values: Mapping[str, Any]
    typed: frozenset[str] = frozenset()
    style: str = "flag"  # flag | column
    extra: Mapping[str, Any] = field(default_factory=dict)  # internal grid columns (validation's)

    def __getitem__(self, name: str) -> Any:
        return self.values.get(name, FIELDS[name].default)

    def given(self, name: str) -> bool:
        return name in self.typed

    def spell(self, name: str) -> str:
        return FIELDS[name].flag if self.style == "flag" else f"column {name!r}"

    def refuse(self, names: Iterable[str], why: str) -> None:
        """SpecsimError naming the first of `names` the user gave, with `why` (it does nothing here)."""
        for name in names:
            if self.given(name):
                raise SpecsimError(f"{self.spell(name)} {why}")

"""Named agentic multi-turn traffic profiles, every number with its source.

A session has turns; turn i's prompt is the previous context (prompt + output of turn i-1, a prefix-cache
hit) plus ``new_tokens_per_turn`` (tool results / the user's next message); ``gap_between_turns_s``
passes between a turn's answer and the next turn (tool time or human think time).

Each number is a ``Sourced``: its value, where it comes from (URL + table / figure), how it was derived
when the source does not state it, and ``assumed`` when no source publishes it (the reason is then in
``derived``). ``agent_profile(name)`` looks a profile up; ``Quantity.sample`` draws from one.

Sources (full citations on each number):
- MOONCAKE: github.com/kvcache-ai/Mooncake FAST25-release/README.md ("Workloads" table) and
  FAST25-release/traces/conversation_trace.jsonl (Kimi production, one hour), read with
  ``specsim.scenario.agent_trace.read_agent_trace`` (computations in examples/traces/SOURCES.md);
- TRACELAB: TraceLab (arXiv:2606.30560, tracelab.cs.washington.edu), 4,265 Claude Code / Codex sessions;
- VLLM_MT: vllm-project/vllm benchmarks/multi_turn/generate_multi_turn.json (the benchmark's defaults);
- INFX: SemiAnalysisAI/InferenceX issue #1632 (AgentX trace replay, MAX_CONTEXT default).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields

import numpy as np
import numpy.typing as npt

from specsim.errors import SpecsimError
from specsim.names import unknown

MOONCAKE_README = ("github.com/kvcache-ai/Mooncake/blob/main/FAST25-release/README.md, 'Workloads' table "
                   "(Conversation / Tool and Agent rows)")
MOONCAKE_CONV = ("github.com/kvcache-ai/Mooncake FAST25-release/traces/conversation_trace.jsonl (12,031 requests), "
                 "computed with specsim.scenario.agent_trace.read_agent_trace; examples/traces/SOURCES.md")
TRACELAB_COUNTS = ("TraceLab (arXiv:2606.30560) tab:session_internal_counts, "
                   "tracelab.cs.washington.edu/exp/session/session_internal_counts/")
TRACELAB_APPEND = ("TraceLab (arXiv:2606.30560) tab:append_by_prefix, "
                   "tracelab.cs.washington.edu/exp/llm_generation/append_by_prefix_bin/")
TRACELAB_TOTALS = ("TraceLab public pool totals, tracelab.cs.washington.edu (357,161 agent steps, "
                   "186.9M output tokens)")
VLLM_MT = "github.com/vllm-project/vllm/blob/main/benchmarks/multi_turn/generate_multi_turn.json"
INFX_1632 = ("github.com/SemiAnalysisAI/InferenceX/issues/1632 (AgentX trace replay scripts' default "
             "MAX_CONTEXT=131072)")
KINDS = ("constant", "uniform", "lognormal", "geometric")


@dataclass(frozen=True)
class Sourced:
    """A number and where it comes from."""

    value: float
    source: str  # URL + table / figure
    derived: str = ""  # how it was computed when the source does not state it (required when assumed)
    assumed: bool = False  # no source publishes it

    def __post_init__(self) -> None:
        if not math.isfinite(self.value) or self.value < 0:
            raise SpecsimError(f"a sourced number must be finite and >= 0, got {self.value!r}")
        if not self.source.strip():
            raise SpecsimError(f"the number {self.value} has no source")
        if self.assumed and not self.derived.strip():
            raise SpecsimError(f"the assumed number {self.value} does not say why ('derived' is empty)")


@dataclass(frozen=True)
class Quantity:
    """A distribution with sourced parameters.

    constant: ``mean``; uniform: ``low``..``high``; lognormal: ``median`` and ``sigma`` or ``mean``
    (sigma = sqrt(2 ln(mean / median))), clipped to ``[low, high]`` when given; geometric: ``mean`` >= 1
    (a count of 1, 2, ... with P(stop) = 1 / mean)."""

    kind: str
    mean: Sourced | None = None
    median: Sourced | None = None
    sigma: Sourced | None = None
    low: Sourced | None = None
    high: Sourced | None = None

    def __post_init__(self) -> None:
        need = {"constant": ("mean",), "uniform": ("low", "high"), "lognormal": ("median",),
                "geometric": ("mean",)}.get(self.kind)
        if need is None:
            raise SpecsimError(f"quantity kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        missing = [k for k in need if getattr(self, k) is None]
        if missing:
            raise SpecsimError(f"a {self.kind} quantity needs {', '.join(missing)}")
        if self.low is not None and self.high is not None and self.low.value > self.high.value:
            raise SpecsimError(f"quantity low {self.low.value} is above high {self.high.value}")
        if self.kind == "lognormal" and (self.sigma is None) == (self.mean is None):
            raise SpecsimError("a lognormal quantity needs exactly one of sigma and mean")
        if self.kind == "lognormal" and self.mean is not None and self.median is not None \
                and self.mean.value < self.median.value:
            raise SpecsimError(f"a lognormal's mean {self.mean.value} is below its median {self.median.value}")
        if self.kind == "geometric" and self.mean is not None and self.mean.value < 1:
            raise SpecsimError(f"a geometric count's mean must be >= 1, got {self.mean.value}")

    def parameters(self) -> Iterator[tuple[str, Sourced]]:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, Sourced):
                yield f.name, v

    def log_sigma(self) -> float:
        """The lognormal's sigma (stated, or from its mean and median)."""
        if self.sigma is not None:
            return self.sigma.value
        assert self.mean is not None and self.median is not None
        return math.sqrt(2.0 * math.log(self.mean.value / self.median.value))

    def sample(self, rng: np.random.Generator, n: int) -> npt.NDArray[np.float64]:
        """``n`` draws (floats; round for token counts)."""
        if self.kind == "constant":
            assert self.mean is not None
            out = np.full(n, self.mean.value)
        elif self.kind == "uniform":
            assert self.low is not None and self.high is not None
            return np.asarray(rng.uniform(self.low.value, self.high.value, n), dtype=np.float64)
        elif self.kind == "geometric":
            assert self.mean is not None
            out = rng.geometric(1.0 / self.mean.value, n).astype(np.float64)
        else:
            assert self.median is not None
            out = self.median.value * np.exp(self.log_sigma() * rng.standard_normal(n))
        lo = self.low.value if self.low is not None else -np.inf
        hi = self.high.value if self.high is not None else np.inf
        return np.asarray(np.clip(out, lo, hi), dtype=np.float64)


@dataclass(frozen=True)
class AgentProfile:
    """A named agentic traffic profile."""

    name: str
    description: str
    turns_per_session: Quantity
    initial_prompt_tokens: Quantity  # system prompt + task / first message
    new_tokens_per_turn: Quantity  # appended per later turn (tool output / user message), previous output excluded
    output_tokens_per_turn: Quantity
    gap_between_turns_s: Quantity  # tool time or think time between a turn's answer and the next turn
    context_limit_tokens: Sourced
    common_prefix_tokens: Sourced  # prompt prefix shared by every session (turn 1 = common + initial prompt)

    def __post_init__(self) -> None:
        if not self.name or not self.description:
            raise SpecsimError("an agent profile needs a name and a description")
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name not in ("name", "description") and not isinstance(v, (Quantity, Sourced)):
                raise SpecsimError(f"agent profile {self.name!r}: field {f.name!r} must be sourced")
        if self.context_limit_tokens.value <= self.common_prefix_tokens.value:
            raise SpecsimError(f"agent profile {self.name!r}: the context limit must exceed the common prefix")

    def sourced_numbers(self) -> Iterator[tuple[str, Sourced]]:
        """Every number of the profile, as (field[.parameter], Sourced)."""
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, Sourced):
                yield f.name, v
            elif isinstance(v, Quantity):
                for p, s in v.parameters():
                    yield f"{f.name}.{p}", s


def _s(value: float, source: str, derived: str = "", assumed: bool = False) -> Sourced:
    return Sourced(float(value), source, derived, assumed)


_MC_FOLLOW = "38.7% of requests share more than the first 512-token block with an earlier request (follow-up turns)"
MOONCAKE_CONVERSATION = AgentProfile(
    name="mooncake-conversation",
    description="Kimi chat traffic (Mooncake FAST'25 conversation trace, one hour of production requests)",
    turns_per_session=Quantity("geometric", mean=_s(1.63, MOONCAKE_CONV, f"{_MC_FOLLOW}; one first turn per session: "
                               "1 / (1 - 0.387) = 1.63 turns; geometric assumed (the trace has no session ids)")),
    initial_prompt_tokens=Quantity(
        "lognormal", median=_s(5264, MOONCAKE_CONV, "median prompt of the 61.3% of requests that share at most the "
                               "first block (first turns)"),
        mean=_s(10765, MOONCAKE_CONV, "mean prompt of the same first-turn requests"),
        high=_s(126195, MOONCAKE_CONV, "the largest prompt in the trace")),
    new_tokens_per_turn=Quantity(
        "lognormal", median=_s(741, MOONCAKE_CONV, "follow-ups' prompt minus shared prefix: median 829, mean 3,242; "
                               "that includes the previous answer (not in the earlier request's blocks), so the mean "
                               "less the mean output 343 = 2,899, and the median scaled by 2,899 / 3,242 -> 741; block "
                               "rounding (512) biases it up by under one block"),
        mean=_s(2899, MOONCAKE_CONV, "3,242 (mean non-shared prompt of follow-ups) - 343 (mean output, README)")),
    output_tokens_per_turn=Quantity("constant", mean=_s(343, MOONCAKE_README, "average output length, Conversation "
                                    "row (12,031 requests); the trace's median is 350 (computed)")),
    gap_between_turns_s=Quantity(
        "lognormal", median=_s(123, MOONCAKE_CONV, "arrival gap from a follow-up's parent (the last earlier "
                               "request ending at its deepest shared block) to the follow-up, 4,658 pairs; "
                               "includes the parent's own serving time; gaps are cut at the trace's one hour"),
        mean=_s(215, MOONCAKE_CONV, "mean of the same parent -> follow-up arrival gaps")),
    context_limit_tokens=_s(131072, MOONCAKE_CONV, "not published in the release; the largest prompt is 126,195 tokens "
                            "(computed), consistent with a 128k = 131,072-token window", assumed=True),
    common_prefix_tokens=_s(512, MOONCAKE_CONV, "99.99% of requests start with block id 0: one 512-token block shared "
                            "by (nearly) every request"),
)

_TL_APPEND = ("append p50 / avg in the most populated prefix bin (128-256k): Claude 710 / 1.4K (34,840 steps), Codex "
              "771 / 2.2K (91,598 steps); mid-points 740 / 1,800; TraceLab's append includes the replayed previous "
              "output (output_append_assignment), so the mean less the mean output 523 = 1,277 and the median scaled "
              "by 1,277 / 1,800 -> 525")
CODING_AGENT = AgentProfile(
    name="coding-agent",
    description="Claude Code / Codex coding sessions in daily use (TraceLab, arXiv:2606.30560): long autonomous tool "
                "loops, long contexts, short outputs",
    turns_per_session=Quantity(
        "lognormal", median=_s(16, TRACELAB_COUNTS, "agent steps per session: p50 of user-initiated steps (1) + p50 of "
                               "tool-initiated steps (15); medians do not add exactly: an approximation"),
        mean=_s(82.5, TRACELAB_COUNTS, "per-session averages: 8.9 user-initiated + 73.6 tool-initiated steps"),
        low=_s(1, TRACELAB_COUNTS, "a session has at least one step (p25 of requests per session is 1)")),
    initial_prompt_tokens=Quantity("constant", mean=_s(
        8596, MOONCAKE_README, "TraceLab publishes no first-step prompt size; the Mooncake 'Tool and Agent' workload's "
        "average input length (23,608 requests) stands in for it", assumed=True)),
    new_tokens_per_turn=Quantity("lognormal", median=_s(525, TRACELAB_APPEND, _TL_APPEND),
                                 mean=_s(1277, TRACELAB_APPEND, _TL_APPEND)),
    output_tokens_per_turn=Quantity("constant", mean=_s(523, TRACELAB_TOTALS, "186.9M output tokens / 357,161 agent "
                                    "steps = 523 (Codex counts include reasoning tokens)")),
    gap_between_turns_s=Quantity(
        "lognormal", median=_s(1.0, TRACELAB_COUNTS, "per-call tool latency is published only as CDFs / box plots "
                               "(tracelab.cs.washington.edu/exp/tool_calls/tool_latency_distribution) whose values we "
                               "could not read; 1 s assumed", assumed=True),
        sigma=_s(1.5, TRACELAB_COUNTS, "heavy tail ('diverse and heavily-tailed tool calls', arXiv:2606.30560 "
                 "abstract); sigma 1.5 assumed", assumed=True)),
    context_limit_tokens=_s(131072, INFX_1632, "the AgentX replay of Claude Code traces "
                            "(semianalysisai/cc-traces-weka) caps requests at MAX_CONTEXT = 131,072"),
    common_prefix_tokens=_s(0, TRACELAB_COUNTS, "cross-session shared prefix (system prompt, tool schemas) not "
                            "published; 0 assumed (sessions share nothing)", assumed=True),
)

_VLLM_NOTE = "the benchmark's lognormal 'average' with its default median_ratio 0.85 (bench_dataset.py)"
VLLM_MULTI_TURN = AgentProfile(
    name="vllm-multi-turn-bench",
    description="vLLM's synthetic multi-turn chat benchmark defaults (benchmarks/multi_turn/generate_multi_turn.json)",
    turns_per_session=Quantity(
        "uniform", low=_s(6, VLLM_MT, "num_turns uniform 12..18 counts user + assistant messages (bench_dataset.py "
                          "rounds it up to even): 6..9 user turns"),
        high=_s(9, VLLM_MT, "num_turns max 18 / 2")),
    initial_prompt_tokens=Quantity(
        "lognormal", median=_s(990, VLLM_MT, f"prefix_num_tokens median 850 ({_VLLM_NOTE}) + the first user message "
                               "(num_tokens uniform 120..160, mean 140)"),
        mean=_s(1140, VLLM_MT, "prefix_num_tokens average 1,000 + 140"),
        high=_s(5160, VLLM_MT, "prefix_num_tokens max 5,000 + 160")),
    new_tokens_per_turn=Quantity("uniform", low=_s(120, VLLM_MT, "prompt_input.num_tokens min"),
                                 high=_s(160, VLLM_MT, "prompt_input.num_tokens max")),
    output_tokens_per_turn=Quantity("uniform", low=_s(80, VLLM_MT, "prompt_output.num_tokens min"),
                                    high=_s(120, VLLM_MT, "prompt_output.num_tokens max")),
    gap_between_turns_s=Quantity("constant", mean=_s(0.0, VLLM_MT, "the config has no think-time field; 0 assumed "
                                 "(the next turn is sent when the answer arrives)", assumed=True)),
    context_limit_tokens=_s(131072, "github.com/vllm-project/vllm/blob/main/benchmarks/multi_turn/README.md (serves "
                            "Meta-Llama-3.1-8B-Instruct)", "Llama-3.1-8B-Instruct's 128k window; the config sets none",
                            assumed=True),
    common_prefix_tokens=_s(500, VLLM_MT, "prompt_input.common_prefix_num_tokens constant 500"),
)

#: Every named profile.
PROFILES: Mapping[str, AgentProfile] = {p.name: p for p in (MOONCAKE_CONVERSATION, CODING_AGENT, VLLM_MULTI_TURN)}


def agent_profile(name: str) -> AgentProfile:
    """A named agentic traffic profile; SpecsimError naming the known ones otherwise."""
    key = str(name).strip().lower().replace("_", "-")
    if key not in PROFILES:
        raise unknown("agent profile", name, PROFILES)
    return PROFILES[key]

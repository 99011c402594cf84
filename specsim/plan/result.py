"""The planner's answer as typed values: per-point figures, per-bucket choices, the policy, the acceptance
band's decision, the arrival-rate result, vLLM's dynamic-k profile and the simulated serving choice.
Written out once, by `specsim.records.to_record` (plan/summary.py builds the JSON record from these)."""

from __future__ import annotations

from dataclasses import dataclass, field

from specsim.drafts.registry import family_of
from specsim.records import OMIT_NONE
from specsim.scenario.scenario import Bucket, Scenario
from specsim.step.policy import Policy

#: the step figures of one configuration at one (batch, context) point, as `specsim evaluate` gives them
FIELDS = ("tokens_per_step", "step_ms", "draft_ms", "verify_ms", "baseline_step_ms", "speedup", "throughput_tok_s",
          "ms_per_token")


@dataclass(frozen=True)
class PointMetrics:
    """One configuration at one load point: the batch, the context, the point's share of its bucket, FIELDS."""

    batch: int
    context: int
    share: float
    tokens_per_step: float
    step_ms: float
    draft_ms: float
    verify_ms: float
    baseline_step_ms: float
    speedup: float
    throughput_tok_s: float
    ms_per_token: float


@dataclass(frozen=True)
class BucketPlan:
    bucket: Bucket
    draft: str
    method: str
    k: int
    rows: tuple[PointMetrics, ...]  # one per context: the figures `evaluate` gives there
    baseline_rows: tuple[PointMetrics, ...]
    fits: bool
    topk: int = 1
    num_draft_tokens: int | None = None  # tree: draft nodes verified (root excluded); None = chain


@dataclass(frozen=True)
class BandChoice:
    """The decision at the prior's central acceptance."""

    gain: float
    method: str
    draft: str

    @property
    def speculates(self) -> bool:
        return family_of(self.method).speculates


@dataclass(frozen=True)
class BandCase:
    """One end of the acceptance band: the chosen policy's gain there (`gain`), what the optimiser would
    choose there and its gain (`best_gain`), and each prior draft's tokens per step at k = 4."""

    gain: float
    best_gain: float
    method: str
    draft: str
    tau: dict[str, float] | None = field(default=None, metadata=OMIT_NONE)

    @property
    def speculates(self) -> bool:
        return family_of(self.method).speculates


@dataclass(frozen=True)
class Threshold:
    """The measurement that settles a decision the band leaves open: past `tau_k4` tokens per step at k = 4 of
    `draft` (towards the band's `end`), the plan would be `beyond` instead."""

    end: str  # low | high
    draft: str
    tau_k4: float
    beyond: BandCase


@dataclass(frozen=True)
class BandDecision:
    """The plan under the acceptance band's low / high cases; robust when neither flips the method nor
    makes the chosen policy lose."""

    central: BandChoice
    low: BandCase
    high: BandCase
    robust: bool
    tau_central: dict[str, float] | None = field(default=None, metadata=OMIT_NONE)
    thresholds: tuple[Threshold, ...] = ()  # where the decision changes, for each end that changes it


@dataclass(frozen=True)
class ArrivalResult:
    """An arrival-rate load solved by Little's law, with and without speculation."""

    rate_rps: float
    concurrency: float
    baseline_concurrency: float
    ms_per_token: float
    baseline_ms_per_token: float
    gain_same_rate: float  # like with like: the same arrival rate (concurrency follows)
    speedup_same_batch: float  # like with like: the same batch


@dataclass(frozen=True)
class DynamicProfile:
    """vLLM's dynamic speculative decoding profile (DynamicSpeculativeConfig), from the model."""

    max_num_speculative_tokens: int
    acceptance_rate_per_pos: tuple[float, ...]
    batch_stats: dict[int, dict[int, float]]
    context_tokens: int
    source: str


@dataclass(frozen=True)
class SloBounds:
    ttft_ms: float
    tpot_ms: float
    percentile: float


@dataclass(frozen=True)
class ServingTrial:
    """One simulation of the SLO search: a candidate (draft, policy) on a number of replicas."""

    draft: str
    policy: str
    origin: str
    replicas: int
    meets_slo: bool
    ttft_ms: float
    tpot_ms: float
    headroom: float


@dataclass(frozen=True)
class ServingBaseline(ServingTrial):
    gpus: int
    cost_per_mtok_usd: float | None


@dataclass(frozen=True)
class ServingChoice:
    """`objective: slo` with traffic: the draft, policy and replicas chosen by simulation (advise/slo.py)."""

    by: str
    slo: SloBounds
    target_rate_rps: float
    requests: int
    seed: int
    draft: str
    method: str
    policy: str
    origin: str
    replicas: int
    gpus_per_replica: int
    gpus: int
    meets_slo: bool
    ttft_ms: float
    tpot_ms: float
    cost_per_mtok_usd: float | None
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_capacity_tokens: int
    baseline: ServingBaseline
    trials: tuple[ServingTrial, ...]

    @property
    def speculates(self) -> bool:
        return family_of(self.method).speculates


@dataclass(frozen=True)
class Plan:
    scenario: Scenario
    method: str  # the draft method chosen for the whole load (engines run one method)
    draft_label: str
    buckets: tuple[BucketPlan, ...]
    policy: Policy  # bands over batch
    crossover: dict[str, int | None]  # per draft: first batch (past where it pays) where it stops paying
    gain: float  # load-weighted throughput (or latency) gain over plain decoding
    per_draft_gain: dict[str, float]
    arrival: ArrivalResult | None = None
    notes: tuple[str, ...] = ()
    band: BandDecision | None = None  # the decision under the acceptance band's low / high cases
    dynamic_profile: DynamicProfile | None = None  # vLLM dynamic speculative decoding profile
    chain_policy: Policy | None = None  # the best chain-only schedule (engines without trees)
    serving: ServingChoice | None = None  # objective slo with traffic: the choice by simulation
    pays: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # per draft: batch ranges where it pays
    #: per draft: the crossover at its 80% band's low and high ends (the earliest and the latest it may stop)
    crossover_band: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)
    details: tuple[str, ...] = ()  # what stands behind the answer in full (priors' sources, what was not searched)

    @property
    def off_by_setting(self) -> bool:
        """Speculation is off because the scenario says so (max_k: 0), not as a finding."""
        return self.scenario.max_k <= 0

    @property
    def speculates(self) -> bool:
        return family_of(self.method).speculates

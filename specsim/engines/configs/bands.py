"""What every engine's configuration is written from: a policy's bands as engines take them (where
speculation runs, the trees, the chain schedule, the largest chain and the last batch that speculates) and
the speculation they run (`Speculation`: the method, its draft, the low-load tree's node paths, vLLM's
dynamic speculative decoding profile)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from specsim.records import Json

#: the draft model written where the scenario names none
DRAFT_MODEL_PATH = "<draft model path>"


@dataclass(frozen=True)
class Band:
    """One band of a policy: batches batch_from..batch_to (inclusive) run k draft passes (a chain's length or
    a tree's depth; k <= 0: no speculation there), a tree expanding topk candidates per level and verifying
    num_draft_tokens draft nodes (None: a chain)."""

    batch_from: int
    batch_to: int
    k: int
    topk: int = 1
    num_draft_tokens: int | None = None

    @property
    def is_tree(self) -> bool:
        return bool(self.num_draft_tokens)

    def as_chain(self) -> Band:
        return dataclasses.replace(self, topk=1, num_draft_tokens=None)


@dataclass(frozen=True)
class Bands:
    """The bands a policy gives engines: all of them (`policy`, those without speculation too), those that
    speculate (`on`) and the chain schedule (`chain`: the per-batch chain lengths of vLLM and TensorRT-LLM)."""

    policy: tuple[Band, ...]
    on: tuple[Band, ...]
    chain: tuple[Band, ...]

    @classmethod
    def of(cls, policy: Sequence[Band], chain_policy: Sequence[Band] = ()) -> Bands:
        """`chain_policy`: the best chain-only schedule, for the per-batch chain lengths when the policy uses
        trees; without one the policy's chain bands, or its bands as chains where it has only trees."""
        on = tuple(b for b in policy if b.k > 0)
        chain = (tuple(b for b in chain_policy if b.k > 0) if chain_policy else
                 tuple(b for b in on if not b.is_tree))
        return cls(tuple(policy), on, chain or tuple(b.as_chain() for b in on))

    @property
    def trees(self) -> tuple[Band, ...]:
        return tuple(b for b in self.on if b.is_tree)

    @property
    def low_tree(self) -> Band | None:
        """The lowest-load tree band: the one static tree shape engines that take one are given."""
        return next(iter(self.trees), None)

    @property
    def k_max(self) -> int:
        return max(b.k for b in self.chain)

    @property
    def last_on(self) -> int:
        """The last batch that speculates."""
        return max(b.batch_to for b in self.on)

    @property
    def per_batch(self) -> bool:
        """The chain length changes with batch, or speculation is off somewhere: a schedule to write."""
        return len(self.chain) > 1 or self.chain[0].batch_from > 1 or any(b.k <= 0 for b in self.policy)


@dataclass(frozen=True)
class Speculation:
    """What engine configurations are written from: the plan's method and bands, its draft model (path and
    tensor parallelism, None where it has none), the low-load tree's node paths (empty without a tree),
    vLLM's dynamic speculative decoding profile (its record), and `hopper_fa3`: the GPU is one on which
    SGLang's default attention backend is FA3 (Hopper), where its trees switch kernels."""

    method: str
    bands: Bands
    draft_model: str | None = None
    draft_tp: int | None = None
    tree_paths: tuple[tuple[int, ...], ...] = ()
    dynamic_profile: Mapping[str, Json] | None = None
    hopper_fa3: bool = True

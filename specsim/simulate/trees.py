"""A draft tree as the event loop runs it. An engine starts with the tree's shape (SGLang's
--speculative-num-steps / --speculative-eagle-topk / --speculative-num-draft-tokens; vLLM's
speculative_token_tree), so a fixed tree runs at one depth: its policy may switch speculation off above a
batch but not change the depth. Each decoding sequence then feeds 1 + the tree's nodes to the verification
pass (`EngineConfig.verify_tokens`), and accepts a depth drawn from the tree's acceptance
(`AcceptanceMix.as_tree`)."""

from __future__ import annotations

import numpy as np

from specsim.drafts.draft import Draft
from specsim.errors import SpecsimError
from specsim.step.policy import Policy


def depths(policy: Policy, max_seqs: int) -> list[int]:
    """The depths (k > 0) a policy runs at batches 1..max_seqs, ascending."""
    return sorted({k for k in policy.k_table(max_seqs)[1:].tolist() if k > 0})


def tree_depth(d: Draft, policy: Policy, max_seqs: int, option: str = "--policy") -> int:
    """The one depth a fixed draft tree runs under `policy` (0: off); SpecsimError when the policy changes the
    depth with batch (module docstring)."""
    depths_run = depths(policy, max_seqs)
    if len(depths_run) > 1:
        top = depths_run[-1]
        raise SpecsimError(f"{option}: {d.label} is a draft tree of fixed shape (topk {d.topk}, {d.num_draft_tokens} "
                           f"nodes) that runs at one depth; {policy.label} changes the depth with batch (give one k, "
                           f"e.g. k={top}, or k={top},off>B)")
    return depths_run[0] if depths_run else 0


def tree_verify_tokens(d: Draft, max_k: int) -> tuple[int, ...]:
    """Tokens per sequence a tree's verification pass takes at depth 0..max_k: 1 + its nodes there."""
    return tuple(round(float(x)) for x in np.atleast_1d(d.verify_tokens_per_seq(np.arange(max_k + 1))))


def tree_policy(d: Draft, policy: Policy, source: str, max_seqs: int) -> tuple[Policy, str | None]:
    """A fixed tree's policy: one depth. A policy the user gave that changes depth is refused (`tree_depth`); the
    analytic plan's (it schedules chains) runs at its deepest, said in a note."""
    if source.startswith("--") or source == "serving.speculation":
        tree_depth(d, policy, max_seqs, source)
        return policy, None
    run = depths(policy, max_seqs)
    if len(run) <= 1:
        return policy, None
    return Policy.static(run[-1]), (f"{d.label} is a draft tree of fixed shape, which an engine runs at one depth: "
                                    f"the policy from {source} ({policy.label}) changes the depth with batch, so it "
                                    f"is simulated at depth {run[-1]} at every batch (--policy k=N to choose)")

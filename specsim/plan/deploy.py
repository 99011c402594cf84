"""What a plan may choose: the configurations its engine deploys as the plan writes them.

A policy is deployed as one engine configuration per batch band (engines/configs/). An engine that changes only a
chain's length with batch (vLLM's num_speculative_tokens_per_batch_size, TensorRT-LLM's draft_len_schedule; ATOM and
the research loops draft chains only) cannot run a tree at low load and a chain above it, so its plan searches
chains only, and its table, headline, policy and engine configs all name the chain the engine runs. SGLang takes a
server configuration per band, a tree's --speculative-eagle-topk / --speculative-num-draft-tokens included, so its
plan searches trees too (`engines.configs.render.runs_tree_bands`). A tree the scenario fixed (a draft's `topk` and
`num_draft_tokens`) is the user's choice and is kept.
"""

from __future__ import annotations

import dataclasses

from specsim.engines.configs.render import runs_tree_bands
from specsim.scenario.scenario import Scenario
from specsim.step.policy import Policy

#: what a policy with tree bands means for the engines that change only a chain's length with batch
TREE_BANDS_NOTE = ("the policy's tree bands run as written in SGLang (one server per band); vLLM, TensorRT-LLM and "
                   "ATOM change only a chain's length with batch, so their configs here are the best chain schedule "
                   "(the low-load tree as an alternative): plan with their engine for their own answer")


def deployable(s: Scenario) -> tuple[Scenario, tuple[str, ...]]:
    """The scenario as its plan searches it (module docstring), and a note for each draft whose trees were left
    out (empty where the engine runs trees per band, or no draft builds trees)."""
    if runs_tree_bands(s.engine.framework):
        return s, ()
    chains_only = [d.label for d in s.drafts if d.can_tree and not d.is_tree]
    if not chains_only:
        return s, ()
    drafts = tuple(dataclasses.replace(d, trees=False) if d.label in chains_only else d for d in s.drafts)
    note = (f"trees not searched for {', '.join(chains_only)}: {s.engine.name} changes only a chain's length with "
            "batch, so a tree at low load and a chain above it is not one configuration it runs (engine: sglang "
            "plans a tree per batch band)")
    return dataclasses.replace(s, drafts=drafts), (note,)


def tree_bands_note(policy: Policy) -> tuple[str, ...]:
    """TREE_BANDS_NOTE where the policy runs a tree in some band (else nothing)."""
    return (TREE_BANDS_NOTE,) if any(seg.num_draft_tokens for seg in policy.schedule) else ()

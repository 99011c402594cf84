"""Sessions drawn from a sourced agent profile (scenario/agent_sources.py): each first request of the traffic starts
a session whose turns, appended tokens, outputs and gaps are drawn from the profile; turn i + 1's prompt is turn i's
prompt and output plus the turn's new tokens (simulate/sessions.py serves the context from the prefix cache); a
session ends at its drawn turns or before a turn whose prompt and output would pass the profile's context limit.
Every session's first `common_prefix_tokens` (a shared system prompt) are cached when it arrives."""

from __future__ import annotations

import numpy as np

from specsim.scenario.agent_sources import agent_profile
from specsim.scenario.session_shape import SessionShape
from specsim.scenario.traffic import Requests

MAX_TURNS = 10_000  # a bound on one session's drawn turns (the context limit ends long ones first)


def profile_requests(first: Requests, name: str, rng: np.random.Generator, max_context_tokens: int = 0) -> Requests:
    """The sessions of `name` started at `first`'s arrivals (module docstring), ending before the profile's context
    limit or `max_context_tokens` (the model's window) where that is lower."""
    p = agent_profile(name)
    n = first.n
    turns = np.clip(np.rint(p.turns_per_session.sample(rng, n)), 1, MAX_TURNS).astype(np.int64)
    common = int(p.common_prefix_tokens.value)
    start = common + np.maximum(1, np.rint(p.initial_prompt_tokens.sample(rng, n))).astype(np.int64)
    limit = int(p.context_limit_tokens.value)
    if max_context_tokens:
        limit = min(limit, max_context_tokens)
    total = int(turns.sum())
    outs = np.maximum(1, np.rint(p.output_tokens_per_turn.sample(rng, total))).astype(np.int64)
    new = np.maximum(0, np.rint(p.new_tokens_per_turn.sample(rng, total))).astype(np.int64)
    gaps = np.maximum(0.0, p.gap_between_turns_s.sample(rng, total))
    # a session's contexts: its first prompt (within the limit) plus every earlier turn's output and new tokens;
    # a later turn is kept while its context is below the limit (contexts only grow), its output cut at the limit
    g = np.repeat(np.arange(n), turns)
    head = np.concatenate([[0], np.cumsum(turns)[:-1]])
    turn = np.arange(total) - head[g]
    grow = np.cumsum(outs + new) - (outs + new)  # before each row, over all rows
    ctx = np.minimum(start, limit - 1)[g] + grow - grow[head][g]
    keep = (turn == 0) | (ctx < limit)
    prompt = ctx[keep].astype(np.int64)
    output = np.maximum(1, np.minimum(outs, limit - ctx))[keep].astype(np.int64)
    return Requests(first.arrival_s[g][keep], prompt, output, first.concurrency,
                    np.minimum(prompt, common).astype(np.int64), g[keep].astype(np.int64),
                    np.where(turn > 0, gaps, 0.0)[keep])


def fixed_requests(first: Requests, shape: SessionShape, later_outputs: np.ndarray | None) -> Requests:
    """Sessions of `shape.turns` turns from `first` (each request a session's first turn): turn i + 1's prompt is
    turn i's prompt and output plus `turn_input_tokens`; later outputs drawn (`later_outputs`, n x (turns - 1)) or
    the first's repeated; a session ends before a turn that would pass `max_context_tokens` (its first stays)."""
    n, t = first.n, shape.turns
    out = first.output_tokens
    if later_outputs is not None:
        outs = np.concatenate([out[:, None], np.asarray(later_outputs).reshape(n, t - 1)], axis=1)
    else:
        outs = np.repeat(out[:, None], t, axis=1)
    grow = np.concatenate([np.zeros((n, 1), dtype=np.int64), outs[:, :-1] + shape.turn_input_tokens], axis=1)
    prompts = first.prompt_tokens[:, None] + np.cumsum(grow, axis=1)
    keep = np.ones((n, t), dtype=bool)
    if shape.max_context_tokens:
        keep = np.cumprod(prompts + outs <= shape.max_context_tokens, axis=1).astype(bool)
        keep[:, 0] = True
    flat = keep.ravel()
    return Requests(np.repeat(first.arrival_s, t)[flat], prompts.ravel()[flat].astype(np.int64),
                    outs.ravel()[flat].astype(np.int64), first.concurrency, None,
                    np.repeat(np.arange(n, dtype=np.int64), t)[flat], np.full(n * t, shape.think_s)[flat])

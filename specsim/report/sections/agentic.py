"""Agent traffic (a scenario whose traffic has sessions or cached prefixes): how the context grows turn by turn,
what the prefix cache serves, and where speculation pays by context length.

The sessions are the scenario's own (generate_requests: a fixed shape or a sourced profile); the cache's share is
the prompt tokens each turn carries from the previous one (an unbounded cache: the simulation's serving section
counts what its KV cache actually kept); the speedup by context is the simulator's own step pricing
(`Setup.cost`: the planner's cost of the plan's draft) at the decode batch the traffic keeps (its clients, else
one), tokens per step from the workload mix: (1 + E[A]) x t_plain / t_speculative."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from specsim.report.context import Ctx, Section, md_table

if TYPE_CHECKING:
    from specsim.advise.simulation import Setup

CONTEXTS = (2_048, 8_192, 16_384, 32_768, 65_536, 131_072, 262_144)
TURNS_SHOWN = 8


def _growth(prompt: np.ndarray, session: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each request's turn index within its session, and the mean prompt per turn index."""
    first = np.concatenate([[True], session[1:] != session[:-1]])
    start = np.maximum.accumulate(np.where(first, np.arange(len(session)), 0))
    turn = np.arange(len(session)) - start
    return turn, np.bincount(turn, weights=prompt) / np.bincount(turn)


def agentic_section(c: Ctx) -> Section | None:
    """None unless the scenario's traffic has sessions or cached prefixes."""
    t = c.s.traffic
    if t is None:
        return None
    from specsim.advise.simulation import make_setup
    from specsim.report.figures.agentic import agentic_figure
    from specsim.scenario.traffic import generate_requests

    setup = make_setup(c.s, analytic=lambda: c.plan)
    traffic = setup.traffic
    if traffic.sessions is None and traffic.cached_fraction == 0:
        return None
    req = generate_requests(traffic, setup.seed)
    session = req.session if req.session is not None else np.arange(req.n)
    turn, means = _growth(req.prompt_tokens, session)
    carried = np.where(turn > 0, np.concatenate([[0], req.prompt_tokens[:-1] + req.output_tokens[:-1]]), 0)
    cached = np.maximum(carried, req.cached_tokens if req.cached_tokens is not None else 0)
    share = int(np.minimum(cached, req.prompt_tokens).sum()) / int(req.prompt_tokens.sum())
    turns = np.bincount(np.unique(session, return_inverse=True)[1])
    window = c.s.model.max_context_tokens or CONTEXTS[-1]
    contexts = [x for x in CONTEXTS if x <= window]
    speed = _speedup_by_context(setup, contexts, req.concurrency or 1)
    body = (f"{traffic.reuse_text().capitalize()}: {len(turns):,} sessions, {turns.mean():.1f} turns on average "
            f"(p90 {np.percentile(turns, 90):.0f}); {share:.0%} of the prompt tokens are the previous turn's context "
            "or a cached prefix (what an unbounded prefix cache would serve).\n\n"
            + md_table(["turn", *[str(i + 1) for i in range(min(TURNS_SHOWN, len(means)))]],
                       [["mean prompt tokens", *[f"{m:,.0f}" for m in means[:TURNS_SHOWN]]]]) + "\n\n"
            + f"Speculation by context ({setup.draft.label}, {setup.policy.label}, decode batch "
            f"{req.concurrency or 1}):\n\n"
            + md_table(["context", *[f"{x // 1024}k" for x in contexts]],
                       [["speedup", *[f"{v:.2f}" for v in speed]]]))
    fig = agentic_figure(means, contexts, speed, f"{c.title}: context per turn, and speculation by context")
    return Section("Agent sessions: context growth, the prefix cache, speculation by context", body, fig, "agentic",
                   "mean prompt tokens by turn (left); speedup of the plan's speculation by context (right)")


def _speedup_by_context(setup: Setup, contexts: list[int], batch: int) -> list[float]:
    """(1 + E[A]) x t_plain / t_speculative at each context, the policy's k at `batch` (module docstring)."""
    policy = setup.policy
    k = int(policy.k_table(batch)[batch]) if policy.enabled else 0
    if k == 0:
        return [1.0] * len(contexts)
    mix, _ = setup.mix()
    tokens = 1.0 + float((mix.expected_accepted(k) * mix.shares).sum())
    m = len(contexts)  # the speculative and the plain step at each context, in one call
    times = setup.cost().decode_s(np.full(2 * m, batch), np.tile(np.asarray(contexts, float), 2),
                                  np.repeat(np.array([k, 0]), m))
    on, off = times[:m], times[m:]
    return [float(x) for x in tokens * off / on]

"""The shape of multi-turn sessions a traffic sends (agent traffic; scenario field traffic.sessions): fixed turns,
appended tokens and think time, or a sourced agent profile (scenario/agent_sessions.py draws the requests)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from specsim.errors import SpecsimError


@dataclass(frozen=True)
class SessionShape:
    """Multi-turn sessions (agent traffic): each arrival starts a session of `turns` requests; a later turn's prompt
    is the context so far (the previous prompt and output) plus `turn_input_tokens` new ones (tool results, the
    user's message), sent `think_s` after the previous turn finishes (simulate/sessions.py)."""

    turns: int
    turn_input_tokens: int = 512
    think_s: float = 0.0
    #: a sourced agent profile (scenario/agent_sources.py) drawing each session's turns, lengths and gaps instead
    profile: str | None = None
    #: a session ends before a turn whose prompt and output pass this (the model's window; 0: no limit)
    max_context_tokens: int = 0

    def __post_init__(self) -> None:
        if self.profile is not None:
            from specsim.scenario.agent_sources import agent_profile

            agent_profile(self.profile)  # a known name, or one line naming the known ones
        if isinstance(self.turns, bool) or self.turns < 1 or self.turn_input_tokens < 0:
            raise SpecsimError(f"sessions: need turns >= 1 and turn_input >= 0, got {self.turns}, "
                               f"{self.turn_input_tokens}")
        if not (self.think_s >= 0 and math.isfinite(self.think_s)):
            raise SpecsimError(f"sessions: think_s must be >= 0, got {self.think_s}")

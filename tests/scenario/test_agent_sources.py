"""Agentic traffic profiles: every number sourced, distributions validated and sampled."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.errors import SpecsimError
from specsim.scenario.agent_sources import PROFILES, Quantity, Sourced, agent_profile


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_number_has_a_source(name: str) -> None:
    p = PROFILES[name]
    numbers = dict(p.sourced_numbers())
    for field in ("turns_per_session", "initial_prompt_tokens", "new_tokens_per_turn", "output_tokens_per_turn",
                  "gap_between_turns_s"):
        assert any(k.startswith(field + ".") for k in numbers), field
    assert {"context_limit_tokens", "common_prefix_tokens"} <= set(numbers)
    for key, s in numbers.items():
        assert s.source.strip(), key
        assert not s.assumed or s.derived.strip(), key  # an assumption says why
        assert "github.com" in s.source or "arXiv" in s.source or "tracelab" in s.source, key


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_profiles_sample_sensibly(name: str) -> None:
    p = PROFILES[name]
    rng = np.random.default_rng(1)
    for q in (p.turns_per_session, p.initial_prompt_tokens, p.new_tokens_per_turn, p.output_tokens_per_turn,
              p.gap_between_turns_s):
        x = q.sample(rng, 20_000)
        assert x.shape == (20_000,) and np.all(np.isfinite(x)) and np.all(x >= 0)
        if q.mean is not None and q.high is None and q.kind != "uniform":
            assert x.mean() == pytest.approx(q.mean.value, rel=0.15)
    assert p.turns_per_session.sample(rng, 1000).min() >= 1


def test_lookup_and_unknown_names() -> None:
    assert agent_profile("Coding_Agent").name == "coding-agent"
    with pytest.raises(SpecsimError, match="unknown agent profile 'coding'"):
        agent_profile("coding")


def test_invalid_numbers_are_refused() -> None:
    with pytest.raises(SpecsimError, match="no source"):
        Sourced(1.0, " ")
    with pytest.raises(SpecsimError, match="does not say why"):
        Sourced(1.0, "x", assumed=True)
    with pytest.raises(SpecsimError, match="finite"):
        Sourced(float("nan"), "x")
    s = Sourced(2.0, "x")
    with pytest.raises(SpecsimError, match="kind"):
        Quantity("normal", mean=s)
    with pytest.raises(SpecsimError, match="needs low, high"):
        Quantity("uniform")
    with pytest.raises(SpecsimError, match="exactly one of sigma and mean"):
        Quantity("lognormal", median=s)
    with pytest.raises(SpecsimError, match="below its median"):
        Quantity("lognormal", median=Sourced(3.0, "x"), mean=s)
    with pytest.raises(SpecsimError, match="above high"):
        Quantity("uniform", low=Sourced(3.0, "x"), high=s)
    with pytest.raises(SpecsimError, match=">= 1"):
        Quantity("geometric", mean=Sourced(0.5, "x"))

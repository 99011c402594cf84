"""Mooncake-format agent traces: the shared prefix against a hand count, sessions, one-line errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from specsim.errors import SpecsimError
from specsim.scenario.agent_trace import (
    NO_SESSION,
    AgentTrace,
    read_agent_trace,
    shared_prefix_blocks,
    shared_prefix_tokens,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "traces" / "agent_sessions_synthetic.jsonl"


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "trace.jsonl"
    p.write_text(text)
    return p


def test_example_file_matches_the_hand_count() -> None:
    # examples/traces/SOURCES.md counts these by hand
    t = read_agent_trace(EXAMPLE)
    np.testing.assert_array_equal(t.shared_prefix_tokens, [0, 1536, 512, 2048, 0, 700])
    np.testing.assert_allclose(t.arrival_s, [0.0, 0.5, 0.9, 1.5, 2.0, 2.5])
    np.testing.assert_array_equal(t.prompt_tokens, [1200, 1700, 600, 2300, 900, 700])
    np.testing.assert_array_equal(t.output_tokens, [50, 40, 30, 20, 10, 5])
    assert t.session_ids == ("s1", "s2")
    np.testing.assert_array_equal(t.session, [0, 0, 1, 0, NO_SESSION, 1])
    np.testing.assert_array_equal(t.new_prompt_tokens, [1200, 164, 88, 252, 900, 0])
    assert t.cached_fraction() == pytest.approx((1536 + 512 + 2048 + 700) / 7400)


def test_prefix_is_a_trie_not_a_set_of_ids() -> None:
    # id 1 seen earlier, but under parent 0: after a new first block it is a different prefix
    assert list(shared_prefix_blocks([[0, 1], [2, 1], [0, 1, 7], [0, 3]])) == [0, 0, 2, 1]
    # a divergent row still adds its blocks for later rows
    assert list(shared_prefix_blocks([[0, 1], [0, 5, 6], [0, 5, 6, 8]])) == [0, 1, 3]
    np.testing.assert_array_equal(shared_prefix_tokens([[4], [4, 5]], np.array([300, 1000]), 512), [0, 512])


def test_mooncake_readme_rows(tmp_path: Path) -> None:
    # the two sample rows of Mooncake's FAST25-release/README.md share 12 blocks = 6144 tokens
    ids = list(range(46, 58))
    text = (f'{{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": {[*ids, 2353, 2354]}}}\n'
            f'\n{{"timestamp": 30535, "input_length": 6472, "output_length": 26, "hash_ids": {[*ids, 2366]}}}\n')
    t = read_agent_trace(_write(tmp_path, text))
    np.testing.assert_array_equal(t.shared_prefix_tokens, [0, 6144])
    np.testing.assert_allclose(t.arrival_s, [0.0, 3.053])
    assert t.session_ids == () and list(t.session) == [NO_SESSION, NO_SESSION]


@pytest.mark.parametrize(("text", "message"), [
    ('{"timestamp": 0, "input_length": 10, "output_length": 1}\nnot json\n', ":2: not a JSON object"),
    ('[1, 2]\n', ":1: not a JSON object, got list"),
    ('{"timestamp": 0, "input_length": 0, "output_length": 1}\n', ":1: field 'input_length' must be an integer >= 1"),
    ('{"timestamp": 0, "input_length": 5, "output_length": 1.5}\n', ":1: field 'output_length' must be an integer"),
    ('{"input_length": 5, "output_length": 1}\n', ":1: field 'timestamp' must be milliseconds >= 0"),
    ('{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1, "a"]}\n', ":1: field 'hash_ids'"),
    ('{"timestamp": 5, "input_length": 5, "output_length": 1}\n{"timestamp": 4, "input_length": 5, '
     '"output_length": 1}\n', ":2: timestamp 4 is before"),
    ('{"timestamp": 0, "input_length": 5, "output_length": 1, "session_id": [1]}\n', ":1: field 'session_id'"),
])
def test_malformed_rows_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(SpecsimError) as err:
        read_agent_trace(path)
    assert str(path) + message in str(err.value) and "\n" not in str(err.value)


def test_empty_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(SpecsimError, match="no requests"):
        read_agent_trace(_write(tmp_path, "\n\n"))
    with pytest.raises(SpecsimError, match="no such file"):
        read_agent_trace(tmp_path / "absent.jsonl")
    with pytest.raises(SpecsimError, match="block_tokens"):
        read_agent_trace(EXAMPLE, block_tokens=0)


def test_trace_validated_when_built() -> None:
    one = np.array([1], dtype=np.int64)
    with pytest.raises(SpecsimError, match="shared prefix"):
        AgentTrace("x", 512, np.zeros(1), one, one, one * 2, np.array([-1]))
    with pytest.raises(SpecsimError, match="one length"):
        AgentTrace("x", 512, np.zeros(2), one, one, one * 0, np.array([-1]))
    with pytest.raises(SpecsimError, match="session"):
        AgentTrace("x", 512, np.zeros(1), one, one, one * 0, np.array([0]))

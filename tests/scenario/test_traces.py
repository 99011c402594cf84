"""Trace readers: the three layouts, and one-line errors naming file, line and field."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from specsim.errors import SpecsimError
from specsim.scenario.traces import read_trace

AZURE = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.6805900,374,44
2023-11-16 18:15:50.7484210,396,109
2023-11-16 18:15:51.0000000,879,0
2023-11-16 18:16:46.6805900,1522,20
"""

BURST = """Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
5,ChatGPT,472,18,490,Conversation log
45,ChatGPT,1087,0,1087,Conversation log
118,GPT-4,417,276,693,Conversation log
125,ChatGPT,1360,230,1590,API log
"""


def _write(tmp_path: Path, text: str, name: str = "trace.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_azure_layout(tmp_path: Path) -> None:
    tr = read_trace(_write(tmp_path, AZURE))
    assert tr.layout == "azure" and tr.n == 3 and tr.dropped == 1
    np.testing.assert_allclose(tr.time_s, [0.0, 4.067831, 60.0], atol=1e-6)
    np.testing.assert_array_equal(tr.prompt_tokens, [374, 396, 1522])
    np.testing.assert_array_equal(tr.output_tokens, [44, 109, 20])


def test_burstgpt_layout_and_model_filter(tmp_path: Path) -> None:
    p = _write(tmp_path, BURST)
    tr = read_trace(p)
    assert tr.layout == "burstgpt" and tr.n == 3 and tr.dropped == 1
    np.testing.assert_allclose(tr.time_s, [0.0, 113.0, 120.0])
    gpt4 = read_trace(p, model="GPT-4")
    assert gpt4.n == 1 and gpt4.prompt_tokens.tolist() == [417]


def test_generic_layout_sorted(tmp_path: Path) -> None:
    tr = read_trace(_write(tmp_path, "time_s,prompt_tokens,output_tokens\n2.5,10,3\n0.5,20,4\n"))
    np.testing.assert_allclose(tr.time_s, [0.0, 2.0])
    assert tr.prompt_tokens.tolist() == [20, 10]


def test_bad_count_names_file_line_and_field(tmp_path: Path) -> None:
    bad = AZURE.replace("396,109", "abc,109")
    with pytest.raises(SpecsimError) as exc:
        read_trace(_write(tmp_path, bad))
    assert str(exc.value) == "trace.csv line 3: field 'ContextTokens' must be an integer >= 0, got 'abc'"


@pytest.mark.parametrize(("old", "new", "message"), [
    ("879,0", "879,-3", "trace.csv line 4: field 'GeneratedTokens' must be an integer >= 0, got '-3'"),
    ("1522,20", "1522,2.5", "trace.csv line 5: field 'GeneratedTokens' must be an integer >= 0, got '2.5'"),
    ("2023-11-16 18:15:50.7484210", "yesterday", "trace.csv line 3: field 'TIMESTAMP' must be a date-time"),
])
def test_more_bad_values(tmp_path: Path, old: str, new: str, message: str) -> None:
    with pytest.raises(SpecsimError) as exc:
        read_trace(_write(tmp_path, AZURE.replace(old, new)))
    assert str(exc.value).startswith(message) and "\n" not in str(exc.value)


def test_line_numbers_survive_the_model_filter(tmp_path: Path) -> None:
    with pytest.raises(SpecsimError) as exc:
        read_trace(_write(tmp_path, BURST.replace("417,276", "417,x")), model="GPT-4")
    assert str(exc.value) == "trace.csv line 4: field 'Response tokens' must be an integer >= 0, got 'x'"


def test_bad_timestamp_in_seconds(tmp_path: Path) -> None:
    with pytest.raises(SpecsimError, match=r"trace.csv line 2: field 'Timestamp' must be a number of seconds"):
        read_trace(_write(tmp_path, BURST.replace("5,ChatGPT", "five,ChatGPT")))


def test_structural_errors(tmp_path: Path) -> None:
    with pytest.raises(SpecsimError, match=r"trace.csv line 1: header .* matches no trace layout"):
        read_trace(_write(tmp_path, "a,b,c\n1,2,3\n"))
    with pytest.raises(SpecsimError, match=r"line 1: missing column 'GeneratedTokens'"):
        read_trace(_write(tmp_path, "TIMESTAMP,ContextTokens\n2023-11-16 18:15:46,3\n"), layout="azure")
    with pytest.raises(SpecsimError, match="empty trace file"):
        read_trace(_write(tmp_path, ""))
    with pytest.raises(SpecsimError, match="not a readable CSV"):
        read_trace(_write(tmp_path, AZURE + "2023-11-16 18:17:00,1,2,3,4\n"))
    with pytest.raises(SpecsimError, match="no such trace file"):
        read_trace(tmp_path / "missing.csv")
    with pytest.raises(SpecsimError, match="unknown trace layout"):
        read_trace(_write(tmp_path, AZURE), layout="vidur")

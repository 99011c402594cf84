"""`specsim pools` (advise/pools.py): the xPyD answer against hand-made rows, the command end to end (the answer
first, 80 columns, the pools beside the aggregated pool of the same GPUs) and bad input in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specsim.advise.pools import PoolRow, fewest_within
from specsim.errors import SpecsimError
from specsim.scenario.kv_cache import parse_pd
from tests.corpus.harness import invoke

BASE = ["pools", "-H", "h100-sxm", "-m", "llama-3.1-8b", "-d", "eagle3", "--input-len", "3000", "--output-len",
        "200", "--rate", "5", "--requests", "60"]


def test_ratios_parse_both_spellings() -> None:
    assert parse_pd("1:2, 2P1D,3:3") == ((1, 2), (2, 1), (3, 3))
    for bad in ("1-2", "0:1", "2:x"):
        with pytest.raises(SpecsimError, match="--pd"):
            parse_pd(bad)


def _row(layout: str, gpus: int, ttft: float, tpot: float, split: bool) -> PoolRow:
    return PoolRow(layout, gpus, ttft / 2, ttft, tpot / 2, tpot, 1000.0, 5.0 if split else None)


def test_fewest_gpus_within_the_limits() -> None:
    rows = [_row("1P1D", 2, 900, 4.0, True), _row("2P1D", 3, 200, 4.5, True), _row("1P2D", 3, 800, 3.0, True),
            _row("2 replicas", 2, 300, 6.0, False), _row("3 replicas", 3, 250, 4.8, False)]
    text = fewest_within(rows, 500, 5)
    assert "2P1D on 3 GPUs" in text and "3 replicas on 3 GPUs" in text
    text = fewest_within(rows, 100, None)
    assert text.count("none of those asked") == 2


def test_pools_end_to_end_json_and_table() -> None:
    r = invoke(*BASE, "--pd", "1:1,1:2", "-f", "json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    layouts = [row["layout"] for row in data["rows"]]
    assert layouts == ["1P1D", "1P2D", "2 replicas", "3 replicas"]
    for row in data["rows"]:
        assert row["ttft_p50_ms"] <= row["ttft_p99_ms"] and row["tpot_p50_ms"] <= row["tpot_p99_ms"]
    split = data["rows"][0]
    # the KV transfer: 3000 tokens x 128 KiB (llama-3.1-8b bf16) / 43.5 GB/s
    assert split["transfer_ms"] == pytest.approx(3000 * 131072 / 43.5e9 * 1e3, rel=1e-6)
    t = invoke(*BASE, "--pd", "1:1", "--ttft-ms", "400", "--tpot-ms", "8")
    assert t.code == 0, t.err
    lines = t.out.splitlines()
    assert lines[0].startswith("Fewest GPUs within TTFT p99 <= 400 ms")
    assert max(len(line) for line in lines) <= 80


@pytest.mark.parametrize("extra,words", [([], "--rate"), (["--rate", "5", "--pd", "1:0"], "--pd"),
                                         (["--rate", "5", "--kv-link", "0"], "--kv-link"),
                                         (["--rate", "5", "--concurrency", "4"], "concurrency")])
def test_bad_input_is_one_line(extra: list[str], words: str) -> None:
    r = invoke("pools", "-H", "h100-sxm", "-m", "llama-3.1-8b", "-d", "eagle3", *extra)
    assert r.code == 2 and words in r.err and len(r.err.strip().splitlines()) == 1, r.err


SCENARIO = str(Path(__file__).resolve().parents[2] / "examples" / "pools-llama8b-h100.yaml")


def test_a_scenario_brings_its_pools_and_its_slo() -> None:
    r = invoke("pools", SCENARIO, "--requests", "60", "-f", "json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert [row["layout"] for row in data["rows"]][:4] == ["1P1D", "1P2D", "2P1D", "2P2D"]  # serving.pools.pd
    assert data["ttft_p99_ms_slo"] == 1000 and data["tpot_p99_ms_slo"] == 8  # serving.slo
    flag = json.loads(invoke("pools", SCENARIO, "--requests", "60", "--pd", "2:1", "-f", "json").out)
    assert [row["layout"] for row in flag["rows"]] == ["2P1D", "3 replicas"]  # the flag replaces the key


def test_the_report_section_is_the_commands_answer() -> None:
    import yaml

    from specsim.report.context import make_ctx
    from specsim.report.sections.pools import pools_section
    from specsim.scenario.scenario import parse_scenario

    data = yaml.safe_load(Path(SCENARIO).read_text())
    data["traffic"]["num_requests"] = 60
    sec = pools_section(make_ctx(parse_scenario(data, SCENARIO)))
    r = json.loads(invoke("pools", SCENARIO, "--requests", "60", "-f", "json").out)
    assert sec is not None and sec.body.startswith(r["answer"])
    for row in r["rows"]:
        assert f"| {row['layout']} | {row['gpus']} | {row['ttft_p50_ms']:,.0f} |" in sec.body

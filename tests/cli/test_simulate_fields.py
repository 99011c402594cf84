"""Parity of simulate's doors (issue 30's floor): every `simulate` field's flag gives the same rows, to the last
digit, as the scenario file whose field of that name says the same; and the scenario-free flags give the rows of
the scenario a benchmark client's question is (written here by hand, not by the code under test)."""

from __future__ import annotations

import copy
import io
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from specsim.fields import FIELDS, fields_of
from tests.corpus.harness import invoke

#: a small closed-loop benchmark: two clients, 16 requests of 256 + 48 tokens, EAGLE-3 at k = 3
BASE: dict[str, Any] = {
    "name": "base", "hardware": "h100-sxm", "model": "llama-3.1-8b", "drafts": [{"method": "eagle3"}], "max_k": 8,
    "traffic": {"arrivals": {"process": "closed", "concurrency": 2}, "num_requests": 16,
                "prompt": {"dist": "fixed", "tokens": 256}, "output": {"dist": "fixed", "tokens": 48}},
    "serving": {"speculation": {"k": 3}, "slo": {"ttft_ms": 5000, "tpot_ms": 100}},
}


DEPLOYMENT = str(Path(__file__).resolve().parents[1] / "data" / "deployment_llama8b_h100.yaml")


def _set(path: str, value: Any) -> Any:
    """An edit of BASE: `value` at the dotted `path` (drafts.0.topk: the first draft's)."""
    def edit(data: dict[str, Any]) -> None:
        node: Any = data
        *head, last = path.split(".")
        for p in head:
            node = node[int(p)] if p.isdigit() else node.setdefault(p, {})
        node[last] = value
    return edit


def _sets(*edits: Any) -> Any:
    def edit(data: dict[str, Any]) -> None:
        for e in edits:
            e(data)
    return edit


#: field -> (the flags, the same question as an edit of the file); `client` is also the measured-as client, which
#: both sides are told
CASES: dict[str, tuple[list[str], Any]] = {
    "hardware": (["-H", "h200"], _set("hardware", "h200")),
    "model": (["-m", "qwen3-8b"], _set("model", "qwen3-8b")),
    "weight_dtype": (["--weight-dtype", "fp8"], _set("weight_dtype", "fp8")),
    "kv_dtype": (["--kv-dtype", "fp8"], _set("kv_dtype", "fp8")),
    "memory_utilization": (["--memory-utilization", "0.5"], _set("memory_utilization", 0.5)),
    "tp": (["--tp", "2"], _set("tp", 2)),
    "dp": (["-m", "mixtral-8x7b", "--tp", "1", "--dp", "2", "--ep", "2"],
           _sets(_set("model", "mixtral-8x7b"), _set("dp", 2), _set("ep", 2))),
    "ep": (["-m", "mixtral-8x7b", "--tp", "2", "--ep", "2"], _sets(_set("model", "mixtral-8x7b"), _set("tp", 2),
                                                                   _set("ep", 2))),
    "pp": (["--pp", "2"], _set("pp", 2)),
    "cp": (["--tp", "2", "--cp", "2"], _sets(_set("tp", 2), _set("cp", 2))),
    "layer_split": (["--pp", "2", "--layer-split"], _sets(_set("pp", 2), _set("layer_split", True))),
    "engine": (["-e", "sglang"], _set("engine", "sglang")),
    "cost_model": (["--cost-model", "roofline"], _set("cost_model", "roofline")),
    "draft": (["-d", "eagle3", "--topk", "2", "--num-draft-tokens", "6"],
              _sets(_set("drafts.0.topk", 2), _set("drafts.0.num_draft_tokens", 6))),
    "k": (["-k", "2"], _set("serving.speculation", {"k": 2})),
    "topk": (["--topk", "4", "--num-draft-tokens", "16"],
             _sets(_set("drafts.0.topk", 4), _set("drafts.0.num_draft_tokens", 16))),
    "num_draft_tokens": (["--topk", "2", "--num-draft-tokens", "4"],
                         _sets(_set("drafts.0.topk", 2), _set("drafts.0.num_draft_tokens", 4))),
    "draft_tp": (["--tp", "2", "--draft-tp", "1"], _sets(_set("tp", 2), _set("drafts.0.draft_tp", 1))),
    "window": (["--window", "4"], _set("drafts.0.window", 4)),
    "guesses": (["--guesses", "3"], _set("drafts.0.guesses", 3)),
    "acceptance_length": (["-k", "3", "--acceptance-length", "2.6"],
                          _set("drafts.0.acceptance", {"acceptance_length": 2.6, "k": 3})),
    "task": (["--task", "code"], _set("task", "code")),
    "temperature": (["--temperature", "1"], _set("temperature", 1.0)),
    "checkpoint": (["--checkpoint", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"],
                   _set("drafts.0.checkpoint", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")),
    "input_len": (["--input-len", "512"], _set("traffic.prompt", {"dist": "fixed", "tokens": 512})),
    "output_len": (["--output-len", "32"], _set("traffic.output", {"dist": "fixed", "tokens": 32})),
    "range_ratio": (["--range-ratio", "0.5"],
                    _sets(_set("traffic.prompt", {"dist": "random", "tokens": 256, "range_ratio": 0.5,
                                                  "client": "vllm"}),
                          _set("traffic.output", {"dist": "random", "tokens": 48, "range_ratio": 0.5,
                                                  "client": "vllm"}))),
    "client": (["--client", "sglang", "--range-ratio", "0.5"],
               _sets(_set("traffic.prompt", {"dist": "random", "tokens": 256, "range_ratio": 0.5,
                                             "client": "sglang"}),
                     _set("traffic.output", {"dist": "random", "tokens": 48, "range_ratio": 0.5,
                                             "client": "sglang"}))),
    "prompts": (["--prompts", "humaneval"], _set("task", "code")),
    "arrivals": (["--rate", "4", "--arrivals", "gamma", "--cv", "2"],
                 _set("traffic.arrivals", {"process": "gamma", "rate_rps": 4.0, "cv": 2.0})),
    "cv": (["--rate", "4", "--arrivals", "gamma", "--cv", "0.5"],
           _set("traffic.arrivals", {"process": "gamma", "rate_rps": 4.0, "cv": 0.5})),
    "rate": (["--rate", "4"], _set("traffic.arrivals", {"process": "poisson", "rate_rps": 4.0, "concurrency": 2})),
    "requests": (["--requests", "10"], _set("traffic.num_requests", 10)),
    "duration": (["--duration", "3"], _sets(lambda d: d["traffic"].pop("num_requests"),
                                           _set("traffic.duration_s", 3.0))),
    "seed": (["--seed", "3"], _set("traffic.seed", 3)),
    "deployment": (["--deployment", DEPLOYMENT], _set("deployment", DEPLOYMENT)),
    "max_num_seqs": (["--max-num-seqs", "1"], _set("serving.max_num_seqs", 1)),
    "policy": (["--policy", "k=2,off>1"], _set("serving.speculation", "k=2,off>1")),
    "target_rate": (["--target-rate", "5"], _set("serving.target_rate_rps", 5.0)),
    "cached_fraction": (["--cached-fraction", "0.5"], _set("traffic.cached_fraction", 0.5)),
    "turns": (["--turns", "3"], _set("traffic.sessions", {"turns": 3})),
    "turn_input_len": (["--turns", "2", "--turn-input-len", "100"],
                       _set("traffic.sessions", {"turns": 2, "turn_input": 100})),
    "think": (["--turns", "2", "--think", "0.5"], _set("traffic.sessions", {"turns": 2, "think_s": 0.5})),
    "agent": (["--agent", "vllm-multi-turn-bench"],
              _sets(lambda d: [d["traffic"].pop(k) for k in ("prompt", "output")],
                    _set("traffic.sessions", {"profile": "vllm-multi-turn-bench"}))),
    "kv_block": (["--turns", "2", "--kv-block", "64"],
                 _sets(_set("traffic.sessions", {"turns": 2}), _set("serving.kv_cache", {"block_tokens": 64}))),
    "kv_offload": (["--kv-offload", "10"], _set("serving.kv_cache", {"offload_gb": 10.0})),
    "host_bw": (["--kv-offload", "10", "--host-bw", "20"],
                _set("serving.kv_cache", {"offload_gb": 10.0, "host_gb_per_s": 20.0})),
}
#: the measured-as client is the command's to say (both sides are told it)
BOTH = {"client": ["--client", "sglang"]}
#: the file a case starts from, where BASE cannot take its flag (a draft model's or lookahead's own settings; a
#: duration, which closed-loop clients do not have)
START = {"draft_tp": _set("drafts", [{"method": "llama-3.2-1b"}]), "window": _set("drafts", [{"method": "lookahead"}]),
         "guesses": _set("drafts", [{"method": "lookahead"}]),
         "duration": _set("traffic.arrivals", {"process": "poisson", "rate_rps": 4.0})}


def _write(tmp_path: Path, name: str, data: dict[str, Any]) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _rows(*args: str) -> pd.DataFrame:
    r = invoke("simulate", *args, "-f", "csv")
    assert r.code == 0, r.err
    return pd.read_csv(io.StringIO(r.out))


def test_every_simulate_field_has_a_case() -> None:
    assert {f.name for f in fields_of("simulate")} == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_flag_answers_as_its_scenario_field_to_the_last_digit(name: str, tmp_path: Path) -> None:
    flags, edit = CASES[name]
    start = copy.deepcopy(BASE)
    START.get(name, lambda d: None)(start)
    base = _write(tmp_path, "base", start)
    data = copy.deepcopy(start)
    edit(data)
    same = _write(tmp_path, "same", data)
    by_flag, by_field = _rows(str(base), *flags), _rows(str(same), *BOTH.get(name, []))
    pd.testing.assert_frame_equal(by_flag, by_field, check_exact=True)
    assert FIELDS[name].scenario or name == "prompts"  # a field a scenario takes, or (prompts) the task it sets


def test_the_flags_alone_are_the_benchmark_scenario(tmp_path: Path) -> None:
    """Without a file the flags make the scenario a benchmark client runs: the hand-written one above."""
    plain = copy.deepcopy(BASE)
    del plain["serving"]["slo"]  # the flags state no SLO
    base = _write(tmp_path, "base", plain)
    free = _rows("-H", "h100-sxm", "-m", "llama-3.1-8b", "-d", "eagle3", "-k", "3", "--input-len", "256",
                 "--output-len", "48", "--concurrency", "2", "--requests", "16")
    filed = _rows(str(base), "--concurrency", "2", "--policy", "k=3", "--requests", "16")
    pd.testing.assert_frame_equal(free, filed, check_exact=True)


#: flags whose case here leaves the rows as they were, and why (documented, not ignored: each changes other runs)
SAME_HERE = {
    "cost_model": "roofline is the H100 profile's own cost model; --cost-model table changes it (tests/cost)",
    "kv_offload": "nothing here is evicted from the GPU to reload (tests/simulate/test_sessions.py prices reloads)",
    "host_bw": "nothing here reloads from the host tier (tests/simulate/test_sessions.py)",
}


@pytest.mark.parametrize("name", sorted(set(CASES) - set(SAME_HERE)))
def test_each_simulate_field_changes_the_rows(name: str, tmp_path: Path) -> None:
    flags, _ = CASES[name]
    start = copy.deepcopy(BASE)
    START.get(name, lambda d: None)(start)
    base = _write(tmp_path, "base", start)
    before, after = _rows(str(base), *BOTH.get(name, [])), _rows(str(base), *flags)
    assert not before.equals(after), f"{FIELDS[name].flag} changed nothing"

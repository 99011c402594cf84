from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from specsim.calibration.runs import read_run, read_server_log
from specsim.errors import SpecsimError

RUNS = Path(__file__).parents[2] / "examples" / "runs"
VLLM_PLAIN = RUNS / "vllm_bench_serve_opt125m_cpu_c2.json"
VLLM_SPEC = RUNS / "vllm_bench_serve_qwen3.8-27b-fp8_mtp_c2.json"
SGLANG_C8 = RUNS / "sglang_qwen2.5-3b_agg_c8.jsonl"
SGLANG_C32 = RUNS / "sglang_qwen2.5-3b_agg_c32.jsonl"
SGLANG_2024 = RUNS / "sglang_llama3.3-70b_h200_old_layout.jsonl"
AIPERF = RUNS / "aiperf_qwen3.6-nvfp4_rtx5090_agent_c16.json"
VLLM_LOG = RUNS / "vllm_server_eagle3_k2.log"


def _one_line_error(exc: pytest.ExceptionInfo[SpecsimError], name: str) -> str:
    msg = str(exc.value)
    assert "\n" not in msg and name in msg, msg
    return msg


@pytest.mark.parametrize("path", [VLLM_PLAIN, VLLM_SPEC])
def test_vllm_examples_read_back_the_figures_the_file_states(path: Path) -> None:
    d = json.loads(path.read_text())
    [run] = read_run(path)
    assert run.client == "vllm" and run.path == str(path)
    assert run.concurrency == d["max_concurrency"] == 2 and run.request_rate == math.inf  # "inf" in the file
    assert (run.num_prompts, run.completed) == (d["num_prompts"], d["completed"])
    assert run.input_len_mean == pytest.approx(d["total_input_tokens"] / d["completed"])
    assert run.output_len_mean == pytest.approx(d["total_output_tokens"] / d["completed"])
    assert run.duration_s == d["duration"] and run.output_tok_s == d["output_throughput"]
    assert (run.tpot_mean_ms, run.ttft_mean_ms, run.itl_mean_ms) == (d["mean_tpot_ms"], d["mean_ttft_ms"],
                                                                     d["mean_itl_ms"])
    assert run.model_id == d["model_id"]


def test_vllm_speculative_fields_match_the_counters() -> None:
    d = json.loads(VLLM_SPEC.read_text())
    [spec] = read_run(VLLM_SPEC)
    [plain] = read_run(VLLM_PLAIN)
    # 1 + accepted / drafts, by hand from the counts the file carries: 1 + 2723 / 1260
    assert spec.acceptance_length == pytest.approx(1 + 2723 / 1260) == d["spec_decode_acceptance_length"]
    assert spec.acceptance_per_position == tuple(d["spec_decode_per_position_acceptance_rates"])
    assert sum(spec.acceptance_per_position) == pytest.approx(2723 / 1260)  # unconditional rates sum to E[accepted]
    assert spec.speculative is True
    assert plain.acceptance_length is None and plain.acceptance_per_position == () and plain.speculative is None


def test_vllm_layout_variants(tmp_path: Path) -> None:
    d: dict[str, Any] = json.loads(VLLM_PLAIN.read_text())
    older = {**d, "request_rate": 4.0, "max_concurrency": None}  # benchmark_serving.py: a number, open loop
    del older["num_prompts"], older["total_output_tokens"]
    appended = tmp_path / "appended.json"  # --append-result: one object per line
    appended.write_text(json.dumps(d) + "\n" + json.dumps(older))
    first, second = read_run(appended)
    assert (first.path, second.path) == (f"{appended}#1", f"{appended}#2")
    assert (second.concurrency, second.request_rate) == (None, 4.0)
    assert second.num_prompts == d["completed"] + d["failed"]
    assert second.output_len_mean == pytest.approx(d["output_throughput"] * d["duration"] / d["completed"])
    infinity = tmp_path / "infinity.json"
    infinity.write_text(json.dumps({**d, "request_rate": math.inf}))  # json.dump writes Infinity
    assert "Infinity" in infinity.read_text() and read_run(infinity)[0].request_rate == math.inf


@pytest.mark.parametrize(("path", "concurrency"), [(SGLANG_C8, 8), (SGLANG_C32, 32)])
def test_sglang_examples_read_back_the_figures_the_file_states(path: Path, concurrency: int) -> None:
    d = json.loads(path.read_text())
    [run] = read_run(path)
    assert run.client == "sglang" and run.path == f"{path}#1"
    assert run.concurrency == d["max_concurrency"] == concurrency and run.request_rate == math.inf
    assert run.completed == d["completed"] == run.num_prompts  # no per-request lists kept: sent = completed
    assert run.input_len_mean == pytest.approx(d["total_input_tokens"] / d["completed"])
    assert run.output_len_mean == pytest.approx(d["total_output_tokens"] / d["completed"])
    assert (run.duration_s, run.output_tok_s) == (d["duration"], d["output_throughput"])
    assert (run.tpot_mean_ms, run.ttft_mean_ms, run.itl_mean_ms) == (d["mean_tpot_ms"], d["mean_ttft_ms"],
                                                                     d["mean_itl_ms"])
    assert run.model_id == d["server_info"]["model_path"] == "Qwen/Qwen2.5-3B-Instruct"
    assert d["server_info"]["speculative_algorithm"] is None and run.speculative is False
    assert run.acceptance_length is None


def test_sglang_jsonl_with_several_runs_gives_several(tmp_path: Path) -> None:
    appended = tmp_path / "runs.jsonl"  # what `--output-file` makes of two runs: lines appended
    appended.write_text(SGLANG_C8.read_text() + SGLANG_C32.read_text() + "\n")
    runs = read_run(appended)
    assert [r.concurrency for r in runs] == [8, 32]
    assert [r.path for r in runs] == [f"{appended}#1", f"{appended}#2"]
    d = json.loads(SGLANG_C8.read_text())
    spec = {**d, "accept_length": 3.21, "server_info": {**d["server_info"], "speculative_algorithm": "EAGLE3"},
            "details": {"errors": [""] * 128}}
    one = tmp_path / "spec.jsonl"
    one.write_text(json.dumps(spec) + "\n")
    [run] = read_run(one)
    assert (run.acceptance_length, run.speculative, run.num_prompts) == (3.21, True, 128)


def test_sglang_2024_layout_names_the_missing_means() -> None:
    with pytest.raises(SpecsimError) as exc:
        read_run(SGLANG_2024)
    msg = _one_line_error(exc, f"{SGLANG_2024}#1")
    assert "mean_tpot_ms" in msg and "mean_ttft_ms" in msg


def test_aiperf_example_reads_back_the_figures_the_file_states() -> None:
    d = json.loads(AIPERF.read_text())
    [run] = read_run(AIPERF)
    [profiling] = [p for p in d["input_config"]["phases"] if p["name"] == "profiling"]
    assert run.client == "aiperf" and run.concurrency == profiling["concurrency"] == 16
    assert run.request_rate == math.inf and run.num_prompts == profiling["requests"] == 96
    assert run.completed == d["request_count"]["avg"]
    assert run.input_len_mean == d["input_sequence_length"]["avg"] == pytest.approx(
        d["total_isl"]["avg"] / d["request_count"]["avg"])
    assert run.output_len_mean == d["output_sequence_length"]["avg"]
    assert run.duration_s == d["benchmark_duration"]["avg"] and d["benchmark_duration"]["unit"] == "sec"
    assert run.output_tok_s == d["output_token_throughput"]["avg"]
    assert run.tpot_mean_ms == d["inter_token_latency"]["avg"]  # AIPerf's per-request ITL is vLLM's TPOT
    assert run.itl_mean_ms == d["inter_chunk_latency"]["avg"]
    assert run.ttft_mean_ms == d["time_to_first_token"]["avg"]
    assert run.model_id == "qwen3.6-nvfp4" and run.speculative is None


def test_aiperf_open_loop_older_and_genai_perf_layouts(tmp_path: Path) -> None:
    d: dict[str, Any] = json.loads(AIPERF.read_text())
    cfg = d["input_config"]
    poisson = {**d, "input_config": {**cfg, "phases": [{"name": "profiling", "type": "poisson", "requests": 96,
                                                        "rate": 1.0}]}}
    loadgen = {**d, "input_config": {"loadgen": {"concurrency": 4, "request_count": 50},
                                     "endpoint": {"model_names": ["m-2025"]}}}
    genai = {k: v for k, v in d.items() if k != "benchmark_duration"}
    genai["input_config"] = {"model": ["m-genai"], "concurrency": None, "request_rate": 2.0}
    genai["time_to_first_token"] = {**d["time_to_first_token"], "unit": "s", "avg": 0.25}
    runs = []
    for i, obj in enumerate((poisson, loadgen, genai)):
        p = tmp_path / f"export{i}.json"
        p.write_text(json.dumps(obj))
        runs += read_run(p)
    assert (runs[0].concurrency, runs[0].request_rate, runs[0].model_id) == (None, 1.0, "qwen3.6-nvfp4")
    assert (runs[1].concurrency, runs[1].request_rate, runs[1].num_prompts, runs[1].model_id) == (
        4, math.inf, 50, "m-2025")
    assert (runs[2].concurrency, runs[2].request_rate, runs[2].model_id) == (None, 2.0, "m-genai")
    assert runs[2].ttft_mean_ms == pytest.approx(250.0)  # seconds converted
    assert runs[2].duration_s == pytest.approx(d["request_count"]["avg"] / d["request_throughput"]["avg"])


@pytest.mark.parametrize(("content", "expect"), [
    ("", "empty file"),
    ("   \n", "empty file"),
    ('{"completed": 8, "duration": 1.0}', "no 'output_throughput' or 'output_token_throughput'"),
    ("completed,duration,output_throughput\n8,1.0,80\n", "not JSON or JSON Lines (line 1"),
    ("[1, 2]", "a JSON list"),
])
def test_malformed_files_refused_in_one_line(tmp_path: Path, content: str, expect: str) -> None:
    p = tmp_path / "runs.json"
    p.write_text(content)
    with pytest.raises(SpecsimError) as exc:
        read_run(p)
    assert expect in _one_line_error(exc, str(p))


def test_truncated_line_missing_fields_and_bad_values_refused(tmp_path: Path) -> None:
    line = SGLANG_C8.read_text().strip()
    truncated = tmp_path / "runs.jsonl"
    truncated.write_text(line + "\n" + line[: len(line) // 2] + "\n")
    with pytest.raises(SpecsimError) as exc:
        read_run(truncated)
    assert "not a complete JSON object" in _one_line_error(exc, f"{truncated}#2")
    d = json.loads(VLLM_PLAIN.read_text())
    cases = {"no_tpot.json": ({k: v for k, v in d.items() if k != "mean_tpot_ms"}, "missing field(s) mean_tpot_ms"),
             "nan.json": ({**d, "duration": math.nan}, "'duration' is not a finite number"),
             "none_done.json": ({**d, "completed": 0}, "no completed requests"),
             "rate.json": ({**d, "request_rate": "fast"}, "'request_rate' is not a rate")}
    for name, (obj, expect) in cases.items():
        p = tmp_path / name
        p.write_text(json.dumps(obj))
        with pytest.raises(SpecsimError) as exc:
            read_run(p)
        assert expect in _one_line_error(exc, str(p))
    with pytest.raises(SpecsimError, match="no such file"):
        read_run(tmp_path / "absent.json")


def test_vllm_server_log_example_aggregates_by_drafts() -> None:
    acc = read_server_log(VLLM_LOG)
    # the log's two SpecDecoding lines (k = 2): Accepted 414 / Drafted 1458, Accepted 4916 / Drafted 18688
    drafts = 1458 / 2 + 18688 / 2
    assert (acc.engine, acc.intervals, acc.num_drafts) == ("vllm", 2, 10073)
    assert acc.acceptance_length == pytest.approx(1 + (414 + 4916) / drafts)  # 1.5291
    assert acc.acceptance_per_position == pytest.approx(
        ((0.432 * 729 + 0.406 * 9344) / drafts, (0.136 * 729 + 0.120 * 9344) / drafts))
    # the printed per-line means agree with the counts: 1.57 and 1.53
    assert round(1 + 414 / 729, 2) == 1.57 and round(1 + 4916 / 9344, 2) == 1.53


def test_vllm_log_older_formats_and_refusals(tmp_path: Path) -> None:
    mid_2025 = ("INFO 06-06 14:20:34 [metrics.py:86] SpecDecoding metrics: Draft acceptance rate: 38.8%, "
                "Mean acceptance length: 2.16, Accepted: 150 tokens, Drafted: 387 tokens, "
                "Per-position acceptance rate: 0.543, 0.357, 0.264\n")
    idle = ("INFO [metrics.py:86] SpecDecoding metrics: Draft acceptance rate: nan%, Accepted: 0 tokens, "
            "Drafted: 0 tokens\n")
    p = tmp_path / "mid.log"
    p.write_text(idle + mid_2025)
    acc = read_server_log(p)
    assert acc.acceptance_length == pytest.approx(1 + 150 / 129) and acc.acceptance_per_position == pytest.approx(
        (0.543, 0.357, 0.264)) and acc.intervals == 1

    def v0(acc_: int, drafted: int, emitted: int) -> str:
        return (f"INFO spec_decode/metrics.py Speculative metrics: Draft acceptance rate: 0.500, System efficiency: "
                f"0.400, Number of speculative tokens: 4, Number of accepted tokens: {acc_}, Number of draft tokens: "
                f"{drafted}, Number of emitted tokens: {emitted}.\n")
    old = tmp_path / "v0.log"  # cumulative counters; the third line is a restarted server
    old.write_text(v0(100, 400, 150) + v0(300, 800, 420) + v0(50, 200, 90))
    acc = read_server_log(old)
    assert acc.acceptance_length == pytest.approx((420 + 90) / (800 / 4 + 200 / 4)) and acc.num_drafts == 250

    mixed = tmp_path / "mixed.log"
    mixed.write_text(mid_2025 + mid_2025.replace("0.543, 0.357, 0.264", "0.543, 0.357"))
    with pytest.raises(SpecsimError) as exc:
        read_server_log(mixed)
    assert "different k (2, 3)" in _one_line_error(exc, str(mixed))
    plain = tmp_path / "plain.log"
    plain.write_text("INFO Engine 000: Avg prompt throughput: 0.0 tokens/s, Running: 0 reqs\n")
    with pytest.raises(SpecsimError) as exc:
        read_server_log(plain)
    assert "no speculative-decoding lines" in _one_line_error(exc, str(plain))


def test_sglang_server_log_weights_accept_len_by_running_requests(tmp_path: Path) -> None:
    # the scheduler's log_decode_stats format: with and without the later "accept rate" field
    lines = [
        "[2025-07-18 15:32:52 TP0] Prefill batch. #new-seq: 1, #new-token: 2192, #cached-token: 35, "
        "token usage: 0.00, #running-req: 0, #queue-req: 0",
        "[2025-07-18 15:32:54 TP0] Decode batch. #running-req: 32, #token: 9000, token usage: 0.10, "
        "accept len: 3.21, accept rate: 0.80, cuda graph: True, gen throughput (token/s): 2900.00, #queue-req: 0, ",
        "[2025-07-18 15:32:55 TP0] Decode batch. #running-req: 8, #token: 2300, token usage: 0.03, "
        "accept len: 2.50, cuda graph: True, gen throughput (token/s): 700.00, #queue-req: 0",
        "[2025-07-18 15:32:56 TP0] Decode batch. #running-req: 4, #token: 900, token usage: 0.01, "
        "accept len: 0.00, accept rate: 0.00, cuda graph: True, gen throughput (token/s): 0.00, #queue-req: 0, ",
    ]
    p = tmp_path / "sglang.log"
    p.write_text("\n".join(lines) + "\n")
    acc = read_server_log(p)
    assert acc.engine == "sglang" and acc.intervals == 2 and acc.acceptance_per_position == ()
    assert acc.acceptance_length == pytest.approx((32 * 3.21 + 8 * 2.50) / 40)  # 3.068; the 0.00 line left out

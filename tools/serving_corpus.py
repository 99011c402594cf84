#!/usr/bin/env python3
"""Build specsim's corpus of published serving results, speculation off and on
(`specsim/validation/data/serving.csv`), one row per (deployment, load point), both arms as columns.

Inputs:
- `../shared/validation/serving-dev.csv` (the shared development set: one row per metric). Only its
  figures are read; every deployment field below is our own mapping, and each row names the original
  source, not the dev file.
- `tools/serving_corpus_extra.yaml` (rows added by hand from sources found outside the dev file).

Rerunnable: `.venv/bin/python tools/serving_corpus.py` rewrites the CSV byte for byte.
`--check` exits 1 if the CSV on disk differs from what would be written. Sources, caveats and how each
column is filled: `specsim/validation/data/SERVING_SOURCES.md`.
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT.parent / "shared" / "validation" / "serving-dev.csv"
EXTRA = Path(__file__).with_name("serving_corpus_extra.yaml")
OUT = ROOT / "specsim" / "validation" / "data" / "serving.csv"

COLUMNS = [
    "id",
    "group",
    "source",
    "hardware",
    "num_gpus",
    "tp",
    "ep",
    "dp_attention",
    "engine",
    "engine_version",
    "model",
    "weight_dtype",
    "kv_dtype",
    "draft",
    "draft_model",
    "k",
    "topk",
    "num_draft_tokens",
    "client",
    "concurrency",
    "rate_rps",
    "input_len",
    "output_len",
    "range_ratio",
    "num_prompts",
    "prompts",
    "ignore_eos",
    "max_num_seqs",
    "output_tok_s_off",
    "output_tok_s_on",
    "tpot_mean_ms_off",
    "tpot_mean_ms_on",
    "tpot_p99_ms_off",
    "tpot_p99_ms_on",
    "ttft_mean_ms_off",
    "ttft_mean_ms_on",
    "ttft_p99_ms_off",
    "ttft_p99_ms_on",
    "acceptance_length",
    "flags",
    "notes",
]
#: dev-file metric name -> our column stem (both arms: `<stem>_off`, `<stem>_on`).
METRICS = {
    "output_tok_s": "output_tok_s",
    "tpot_mean_ms": "tpot_mean_ms",
    "tpot_p99_ms": "tpot_p99_ms",
    "ttft_mean_ms": "ttft_mean_ms",
    "ttft_p99_ms": "ttft_p99_ms",
}
FLAG_ORDER = ("SLOWDOWN", "CONFOUNDED", "SECONDARY")

# --------------------------------------------------------------------------------------------------
# Deployments behind the dev rows (our own mapping; see SERVING_SOURCES.md for the reasoning).
# One shared base per deployment family; each deployment states only what differs from it.
# `num_prompts_per_conc`: the client sends that many prompts per unit of concurrency.
# --------------------------------------------------------------------------------------------------


def _gpus(n: int) -> dict[str, int]:
    """`n` GPUs, tensor-parallel across all of them (every dev deployment)."""
    return dict(num_gpus=n, tp=n)


#: no expert parallelism, no data-parallel attention
_NO_EP = dict(ep=1, dp_attention=False)
#: the target checkpoint's own multi-token-prediction layer as the drafter
_MTP = dict(draft="mtp", draft_model="in-checkpoint MTP layer")
#: vLLM on one node at its 16-bit defaults, driven by the publisher's own client
_VLLM_BF16 = dict(_NO_EP, engine="vllm", weight_dtype="bf16", kv_dtype="bf16", client="custom")
_DSV4_PRO_NATIVE = "fp8_block,experts=mxfp4,head=bf16"

# ATOM's own CI dashboard on MI355X: native ATOM (May and August runs) and ATOM-SGLang.
_ATOM_DASH = "ROCm/ATOM gh-pages benchmark-dashboard/data.js"
_ATOM_MAY = (
    f"{_ATOM_DASH} @ fd479fe9c4ac293b567154c1dc4326ae38762487 (rocm.github.io/ATOM/benchmark-dashboard); "
    "entry for ATOM commit a7ef44aed0, CI run github.com/ROCm/ATOM/actions/runs/26242951282, published "
    "2026-05-22; server args .github/benchmark/models.json @ a7ef44aed0842d6d2c305634a8e3e8d9fa5a8e7e"
)
_ATOM_AUG = (
    f"{_ATOM_DASH} @ d42315af140f7e46abd87ef585e699466eb57b05 (rocm.github.io/ATOM/benchmark-dashboard); "
    "entry for ATOM commit 514ed7c8e5, CI run github.com/ROCm/ATOM/actions/runs/31323568615, published "
    "2026-08-10; server args .github/benchmark/models.json @ 514ed7c8e5505ce72207f6f1c2a7eaaa0d36b460"
)
_ATOM_SGL = (
    f"{_ATOM_DASH} @ fd479fe9c4ac293b567154c1dc4326ae38762487 (rocm.github.io/ATOM/benchmark-dashboard); "
    "entry for ATOM commit 983a39fee9, CI run github.com/ROCm/ATOM/actions/runs/26237979186, published "
    "2026-05-22; server args .github/benchmark/sglang_benchmark_models.json @ "
    "983a39fee90eb7dad77201776df1cfd6e86f719d"
)
_ATOM_VER_MAY = (
    "ATOM a7ef44aed0 (2026-05-22); image rocm/atom-dev nightly_202605201600 (also logged as :latest); ROCm 7.2.3"
)
_ATOM_VER_AUG = "ATOM 514ed7c8e5 (2026-08-07); image rocm/atom-dev:nightly_202608091507"
_ATOM_COMMON = dict(
    _NO_EP,
    **_MTP,
    hardware="mi355x",
    engine="atom",
    kv_dtype="fp8",
    k=3,
    client="atom",
    output_len=1024,
    range_ratio=0.8,
    num_prompts_per_conc=10,
    ignore_eos=True,
)
_ATOM_MAY_RUN = dict(
    _ATOM_COMMON, group="atom-mi355x", source=_ATOM_MAY, engine_version=_ATOM_VER_MAY, prompts="random-chat"
)
_ATOM_AUG_RUN = dict(
    _ATOM_COMMON, group="atom-mi355x", source=_ATOM_AUG, engine_version=_ATOM_VER_AUG, prompts="random-chat"
)
_ATOM_DSV4 = dict(_ATOM_AUG_RUN, **_gpus(8), model="deepseek-v4-pro", weight_dtype=_DSV4_PRO_NATIVE)
_ATOM_GLM = dict(_ATOM_AUG_RUN, **_gpus(4), model="glm-5.2")
_ATOM_SGL_RUN = dict(
    _ATOM_COMMON,
    **_gpus(8),
    group="atom-sglang-mi355x",
    source=_ATOM_SGL,
    engine="sglang",
    engine_version="sglang v0.5.10 nightly with ATOM model backend (ATOM-SGLang), image "
    "rocm/atom-dev:sglang-v0.5.10-nightly_20260520, ATOM 983a39fee9, ROCm 7.2.3",
    model="deepseek-r1",
    weight_dtype="bf16,experts=mxfp4",
    kv_dtype="bf16",
    topk=1,
    prompts="random",
)


def _atom_series(off: str, on: str = "... MTP3") -> str:
    return f"series '{off}' vs '{on}'"


def _atom_server(tp: int, args: str = "", then: str = "") -> str:
    """ATOM's server command line as the notes quote it: the OFF arm's args, the ON arm's additions."""
    return f"server --kv_cache_dtype fp8 -tp {tp}{args} (+ --method mtp --num-speculative-tokens 3){then}"


_ATOM_CLIENT = (
    "client python -m atom.benchmarks.benchmark_serving --dataset-name random --random-range-ratio 0.8 "
    "--num-prompts 10*conc --num-warmups 2*conc --max-concurrency conc --request-rate inf --ignore-eos; "
    "dashboard throughput=output_throughput, TPOT=mean_tpot_ms, TTFT=mean_ttft_ms "
    "(.github/scripts/plugin_benchmark_to_dashboard.py)"
)
_CHAT_ON = (
    "ON arm client adds --use-chat-template, OFF does not: prompts_off=random, prompts_on=random-chat "
    "(prompts column gives the spec arm's)"
)
_EP_TP = "no expert-parallel flag in the server args: MoE tensor-parallel, ep=1 assumed"
_ATOM_TAIL = [_EP_TP, _ATOM_CLIENT]
_ATOM_NO_AL = "acceptance not published (May run)"
_ATOM_AL = "acceptance_length = dashboard 'Accept Length (tok/fwd)'"
_NO_PREFIX = " --no-enable_prefix_caching"
_DSR1_MXFP4 = "DeepSeek-R1-0528-MXFP4"
_ATOM_SGL_SERIES = f"ATOM-SGLang::{_DSR1_MXFP4}-MTP-MoEFP4"
_ATOM_SGL_NOTES = [
    "kv cache dtype not set (auto): bf16 assumed",
    "no chat template in either arm",
    "partial sweep: only points where both arms were published",
    "acceptance not published",
]

# YYukin0/Specter: vLLM V1 on one A40, EAGLE-3 and n-gram against the same baseline arm.
_SPECTER = dict(
    _VLLM_BF16,
    **_gpus(1),
    group="specter-a40",
    hardware="a40",
    engine_version="0.10.2 (V1)",
    model="llama-3.1-8b",
    k=3,
    output_len=1024,
    prompts="dataset:gsm8k",
    ignore_eos=False,
)


def _specter_source(arm: str) -> str:
    return (
        "github.com/YYukin0/Specter docs/engineering-notes/09-mac-vs-a40.md (commit 19228295), "
        "'The result' table; results/bullet2_vllm_eagle3.json (commit 572e277a), results.baseline vs "
        f"results.{arm} by concurrency"
    )


_SPECTER_HEAD = ["1x A40 on RunPod"]
_SPECTER_TAIL = ["acceptance null in the JSON", "kv dtype auto (bf16)"]

# xuhuan51/dspark-spec-serving-benchmark: Qwen3-32B on A30s with the (mismatched) Qwen3-14B DSpark drafter.
_DSPARK_32B = dict(
    _VLLM_BF16,
    group="dspark-a30",
    max_num_seqs=16,
    hardware="a30",
    engine_version="0.26.0 (torch 2.11.0+cu130)",
    model="qwen3-32b",
    draft="dspark",
    draft_model="deepseek-ai/dspark_qwen3_14b_block7 (mismatched 14B drafter)",
    k=7,
    output_len=256,
    prompts="",
    ignore_eos=True,
)


def _dspark_source(table: str) -> str:
    return (
        "github.com/xuhuan51/dspark-spec-serving-benchmark reports/vllm026_dspark_32b_cross_target.md "
        f"(2026-08-05), table '{table}'; results/vllm026_qwen3_32b_dspark_cross_target.csv "
        "@ f74b5e9b673736a0f46f2a34fceff91ee38c9835"
    )


_DSPARK_LOAD = "fixed 256 output tokens, temperature 0, ignore_eos; prompt set and input length not stated"

DEV_DEPLOYMENTS: dict[str, dict] = {
    "ATOM::Qwen3.5-397B-A17B-FP8 MTP3": dict(
        _ATOM_MAY_RUN,
        **_gpus(4),
        slug="qwen35-397b-fp8",
        model="qwen3.5-397b-a17b",
        weight_dtype="fp8",
        prompts="random",
        notes=[
            _atom_series("ATOM::Qwen3.5-397B-A17B-FP8"),
            _atom_server(4),
            f"neither arm uses the chat template (bench_args empty): MTP drafts on raw random tokens; {_ATOM_NO_AL}",
            "hybrid Gated-DeltaNet/attention MoE target",
            *_ATOM_TAIL,
        ],
    ),
    "ATOM::DeepSeek-R1-0528 MTP3": dict(
        _ATOM_MAY_RUN,
        **_gpus(8),
        slug="dsr1-fp8",
        model="deepseek-r1",
        weight_dtype="fp8_block,head=bf16",
        notes=[
            _atom_series("ATOM::DeepSeek-R1-0528"),
            "checkpoint deepseek-ai/DeepSeek-R1-0528 (block FP8, lm_head bf16)",
            _atom_server(8),
            _CHAT_ON,
            _ATOM_NO_AL,
            *_ATOM_TAIL,
        ],
    ),
    f"ATOM::{_DSR1_MXFP4} MTP3": dict(
        _ATOM_MAY_RUN,
        **_gpus(4),
        slug="dsr1-mxfp4",
        model="deepseek-r1",
        weight_dtype="bf16,experts=mxfp4",
        notes=[
            _atom_series(f"ATOM::{_DSR1_MXFP4}"),
            f"checkpoint amd/{_DSR1_MXFP4}-MTP-MoEFP4 (AMD Quark)",
            "weight_dtype estimate: this checkpoint's card was not found; the sibling "
            f"amd/{_DSR1_MXFP4} card excludes *self_attn*, *mlp.gate.* and lm_head from MXFP4 (bf16, "
            "dequantised from FP8) and the name says MoE-only FP4; dense FFN and MTP precision not confirmed",
            _atom_server(4),
            _CHAT_ON,
            _ATOM_NO_AL,
            "8192/1024 c=256 ON point missing in the source",
            *_ATOM_TAIL,
        ],
    ),
    "ATOM::DeepSeek-V4-Pro MTP3": dict(
        _ATOM_DSV4,
        slug="dsv4-pro",
        notes=[
            _atom_series("ATOM::DeepSeek-V4-Pro"),
            "native checkpoint deepseek-ai/DeepSeek-V4-Pro "
            "(FP8 with FP4 experts, as specsim's catalogue native_precision)",
            _atom_server(8, f"{_NO_PREFIX}, env AITER_BF16_FP8_MOE_BOUND=0 ATOM_MOE_GU_ITLV=1"),
            _CHAT_ON,
            _ATOM_AL,
            "some ON TTFTs are multi-second outliers "
            "(e.g. 8192/1024 c=64 5000.78 ms); run-to-run noise not characterised",
            *_ATOM_TAIL,
        ],
    ),
    "ATOM::DeepSeek-V4-Pro DPA MTP3": dict(
        _ATOM_DSV4,
        slug="dsv4-pro-dpa",
        dp_attention=True,
        notes=[
            _atom_series("ATOM::DeepSeek-V4-Pro DPA", "... DPA MTP3"),
            _atom_server(8, f"{_NO_PREFIX} --enable-dp-attention"),
            _CHAT_ON,
            _ATOM_AL,
            "ep uncertain: DP attention with no expert-parallel flag; MoE layout not stated, ep=1 assumed",
            "8192/1024 c=1024 ON point missing in the source",
            _ATOM_CLIENT,
        ],
    ),
    "ATOM::GLM-5.2-FP8 MTP3": dict(
        _ATOM_GLM,
        slug="glm52-fp8",
        weight_dtype="fp8",
        notes=[
            _atom_series("ATOM::GLM-5.2-FP8"),
            "checkpoint zai-org/GLM-5.2-FP8 with ATOM online quant "
            "(--online_quant_config: global ptpc_fp8, experts mxfp8); specsim has no mxfp8, filed as fp8 "
            "(1 byte/weight; the MX scale, 1/32 byte, ignored)",
            _atom_server(4, f"{_NO_PREFIX}, env AITER_QUICK_REDUCE_QUANTIZATION=INT4 AITER_USE_FLYDSL_MOE_SORTING=1"),
            _CHAT_ON,
            _ATOM_AL,
            "8192/1024 c>=128: both arms queue heavily (TTFT 10-95 s)",
            *_ATOM_TAIL,
        ],
    ),
    "ATOM::GLM-5.2-MXFP4 MTP3": dict(
        _ATOM_GLM,
        slug="glm52-mxfp4",
        weight_dtype="fp8,experts=mxfp4",
        notes=[
            _atom_series("ATOM::GLM-5.2-MXFP4"),
            "checkpoint amd/GLM-5.2-MXFP4 (MXFP4 experts) with ATOM online ptpc_fp8 for the non-expert layers",
            _atom_server(
                4,
                _NO_PREFIX,
                "; the ON arm's online-quant exclude list names layers 0-77 experts explicitly, so only the MTP "
                "layer's experts differ",
            ),
            _CHAT_ON,
            _ATOM_AL,
            *_ATOM_TAIL,
        ],
    ),
    f"ATOM-SGLang::{_DSR1_MXFP4}-mtp3": dict(
        _ATOM_SGL_RUN,
        slug="dsr1-mxfp4-nextn3",
        k=3,
        num_draft_tokens=4,
        notes=[
            _atom_series(_ATOM_SGL_SERIES, f"ATOM-SGLang::{_DSR1_MXFP4}-mtp3"),
            f"checkpoint amd/{_DSR1_MXFP4}-MTP-MoEFP4; weight_dtype estimate as for atom-mi355x dsr1-mxfp4",
            "server --trust-remote-code --tensor-parallel-size 8 (+ --speculative-algorithm NEXTN "
            "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4), env "
            "AITER_QUICK_REDUCE_QUANTIZATION=INT4 SGLANG_AITER_FP8_PREFILL_ATTN=0 SGLANG_USE_AITER=1 "
            "ATOM_ENABLE_DS_QKNORM_QUANT_FUSION=1",
            *_ATOM_SGL_NOTES,
            "c=64 ON TTFT 3.4-5.3 s vs ~0.2-0.8 s OFF",
            "client benchmark_serving.py --backend sglang --dataset-name random --random-range-ratio 0.8 "
            "--num-prompts 10*conc --num-warmups 2*conc --request-rate inf --ignore-eos (ATOM CI; vLLM-style "
            "metric definitions)",
            _EP_TP,
        ],
    ),
    f"ATOM-SGLang::{_DSR1_MXFP4}-mtp1": dict(
        _ATOM_SGL_RUN,
        slug="dsr1-mxfp4-nextn1",
        k=1,
        num_draft_tokens=2,
        notes=[
            _atom_series(_ATOM_SGL_SERIES, f"ATOM-SGLang::{_DSR1_MXFP4}-mtp1"),
            "same deployment as nextn3 but --speculative-num-steps 1 --speculative-eagle-topk 1 "
            "--speculative-num-draft-tokens 2",
            "weight_dtype estimate as for atom-mi355x dsr1-mxfp4",
            *_ATOM_SGL_NOTES,
            "client as nextn3",
            _EP_TP,
        ],
    ),
    "specter:eagle3": dict(
        _SPECTER,
        slug="llama31-8b-eagle3",
        source=_specter_source("eagle3"),
        draft="eagle3",
        draft_model="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        notes=[
            *_SPECTER_HEAD,
            "server vllm serve meta-llama/Llama-3.1-8B-Instruct --seed 42 --max-model-len "
            '4096 (+ --speculative-config {"method":"eagle3","model":"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",'
            '"num_speculative_tokens":3})',
            "client guidellm run --profile kind=concurrent,streams=N "
            "--data openai/gsm8k (main/test) --constraint max_duration 60 s; max_tokens 1024 (output_len is the "
            "cap; outputs end at EOS), temperature 0",
            "output_tok_s = guidellm mean_output_tokens_per_sec",
            "one 60 s window per point: the request count varies by arm (c=1: 11 baseline / 26 eagle3); the "
            "author warns p99s at c<=4 are noisy",
            "input_len: GSM8K questions, not stated",
            *_SPECTER_TAIL,
        ],
    ),
    "specter:ngram": dict(
        _SPECTER,
        slug="llama31-8b-ngram",
        source=_specter_source("ngram"),
        draft="ngram",
        draft_model="",
        notes=[
            *_SPECTER_HEAD,
            'server as the eagle3 rows with --speculative-config {"method":"ngram",'
            '"num_speculative_tokens":3,"prompt_lookup_min":2,"prompt_lookup_max":4}',
            "client guidellm as the eagle3 rows (same baseline arm)",
            "one 60 s window per point; p99s at c<=4 rest on few requests",
            *_SPECTER_TAIL,
        ],
    ),
    "dspark:Qwen/Qwen3-32B": dict(
        _DSPARK_32B,
        **_gpus(8),
        slug="qwen3-32b-bf16-tp8-x14b",
        source=_dspark_source("Qwen3-32B BF16, TP8"),
        notes=[
            "deliberately mismatched drafter: the Qwen3-14B DSpark checkpoint on the 32B target (shared hidden "
            "size and vocab); not a trained 32B drafter",
            "server --dtype bfloat16 -tp 8 --gpu-memory-utilization "
            "0.75 --max-num-seqs 16 --max-num-batched-tokens 8192 --max-model-len 2048; ON adds "
            "--speculative-config {method: dspark, num_speculative_tokens: 7, draft_tensor_parallel_size: 8}",
            "baseline and DSpark run sequentially on the same 8 GPUs",
            _DSPARK_LOAD,
            "TPOT statistic (mean or median) not stated; filed as mean",
            "acceptance_length = 1 + accepted_draft_tokens / draft_rounds (source)",
            "kv dtype not set (auto, bf16)",
        ],
    ),
    "dspark:Qwen3-32B-W4A16-AWQ": dict(
        _DSPARK_32B,
        **_gpus(4),
        slug="qwen3-32b-awq-tp4-x14b",
        source=_dspark_source("Qwen3-32B INT4, TP4"),
        weight_dtype="w4a16",
        notes=[
            "target Qwen3-32B-W4A16-AWQ (local path; AWQ int4 weights)",
            "deliberately mismatched drafter, as the BF16 rows",
            "server --dtype auto -tp 4 --gpu-memory-utilization 0.88 --max-num-seqs 16 "
            "--max-num-batched-tokens 8192 --max-model-len 2048; ON adds dspark, 7 tokens, draft TP 4",
            _DSPARK_LOAD,
            "TPOT statistic not stated; filed as mean",
            "acceptance_length = 1 + accepted/draft_rounds (source)",
            "kv dtype not set (auto, fp16/bf16 activations)",
        ],
    ),
    "ngramh100": dict(
        _VLLM_BF16,
        **_gpus(1),
        slug="qwen25-7b-ngram",
        group="ngram-h100",
        source=(
            "github.com/waynehacking8/trtllm-triton-serving results/report.md section 8 and README study 9 "
            "'Speculative decoding under concurrency'; results/spec_concurrency_{baseline,ngram}.json and "
            "bench/spec_concurrency.py @ d430ba9b395f2924c06b512ec8f812061362f296"
        ),
        hardware="h100-sxm",
        engine_version="",
        model="qwen2.5-7b",
        draft="ngram",
        draft_model="",
        k=5,
        output_len=200,
        num_prompts_per_conc=4,
        prompts="dataset:extractive-repeat-passage",
        ignore_eos=False,
        notes=[
            "repo resolved from bench/spec_concurrency.py: baseline and n-gram vLLM servers run sequentially on "
            "the same GPU (TP 1)",
            "k=5: README study 6 server --speculative-config {method: ngram, "
            "num_speculative_tokens: 5, prompt_lookup_max: 4}, and study 9 says 'verifying 5 draft tokens per "
            "step'",
            "hardware: README '4x NVIDIA H100 80GB, NVLink'; form factor not stated, h100-sxm assumed",
            "weights 16-bit (vLLM default dtype for Qwen2.5-7B-Instruct; fp16 vs bf16 not recorded)",
            "vLLM version not stated",
            "client: non-streaming /v1/completions, one fixed extractive prompt "
            "('Repeat the following text exactly...' + a ~90-word passage x2), max_tokens 200, temperature 0, "
            "no ignore_eos; every request produced 200 tokens (out_tokens_total = 200 x requests); c warm-up "
            "requests then 4*c measured; output_tok_s = out tokens / wall time",
            "input_len not stated (short fixed prompt)",
            "draft acceptance (accepted/drafted, vLLM counters) 97-99% at every point",
            "the dev note's 256-token output (report-wide wording) is wrong for this study: 200",
        ],
    ),
    "trt11434": dict(
        _MTP,
        **_gpus(8),
        slug="dsv31-nvfp4-mtp",
        group="trtllm-b200-dsv31",
        source=(
            "NVIDIA/TensorRT-LLM PR #11434 (github.com/NVIDIA/TensorRT-LLM/pull/11434) and Baseten blog "
            "'Boosting MTP acceptance rates' (baseten.co, 2026-05-05); figures read through a third-party "
            "research note (GitHub index file id 71591207014, section 1.2 table), not from the PR itself"
        ),
        hardware="b200",
        ep="",
        dp_attention="",
        engine="trtllm",
        engine_version="",
        model="deepseek-v3.1",
        weight_dtype="bf16,dense=nvfp4,experts=nvfp4",
        kv_dtype="",
        k=8,
        client="",
        input_len=413,
        output_len=256,
        num_prompts=100,
        prompts="dataset:glaiveai/code_edits_sample",
        ignore_eos="",
        flags=["SECONDARY"],
        notes=[
            "nvidia/DeepSeek-V3.1-NVFP4, 8x B200 TP 8, '8 MTP layers' (k=8 as quoted)",
            "weight_dtype per "
            "NVIDIA's NVFP4 DeepSeek recipe (attention and lm_head bf16, dense FFN and MoE nvfp4); not stated in "
            "the note",
            "100 requests, average input 413, average output 256",
            "concurrency not stated (98 tok/s at 9.88 ms TPOT is consistent with one stream; not confirmed)",
            "TTFT/TPOT statistic not stated; filed as mean",
            "ON arm accept rate 0.2704; a third arm MTP + suffix automaton (299.31 tok/s, TPOT "
            "2.91 ms, AL 5.41) not filed",
            "client, kv dtype, ep and engine version not stated",
        ],
    ),
    "dsv4mi355": dict(
        _NO_EP,
        **_MTP,
        **_gpus(8),
        slug="dsv4-pro-eagle1",
        group="sglang-dsv4-mi355x",
        max_num_seqs=8,
        source=(
            "engineering note 'DeepSeek-V4-Pro single-step MTP (EAGLE) on ROCm / MI355X (gfx950)', "
            "'Measured speedup' table (GitHub index file id 61471290779; repository not resolved)"
        ),
        hardware="mi355x",
        engine="sglang",
        engine_version="sglang main (date not stated) inside the AMD f96ac98 ROCm image",
        model="deepseek-v4-pro",
        weight_dtype=_DSV4_PRO_NATIVE,
        kv_dtype="",
        k=1,
        topk=1,
        num_draft_tokens=2,
        client="sglang",
        input_len=256,
        output_len=256,
        prompts="random",
        notes=[
            "'same source, same env, only --speculative on/off'",
            "server --attention-backend compressed --tp 8 "
            "--page-size 256 --chunked-prefill-size 4096 --mem-fraction-static 0.80 --max-running-requests 8 "
            "--disable-shared-experts-fusion (+ --speculative-algorithm EAGLE --speculative-num-steps 1 "
            "--speculative-eagle-topk 1 --speculative-num-draft-tokens 2), SGLANG_ENABLE_SPEC_V2=1",
            "--max-running-requests 8 caps the batch at c=8",
            "native checkpoint (weight_dtype as specsim's catalogue native)",
            "client not named: 'random 256in/256out'; sglang bench_serving assumed; "
            "range ratio, prompt count and ignore_eos not stated",
            "spec_accept_rate 0.70-0.875 (whole run)",
            "kv dtype not stated",
        ],
    ),
}


def _dev_key(row: dict) -> tuple[str, str]:
    """(deployment key, the dev row's series text) for a dev row."""
    rid = row["id"]
    if rid.startswith("atomdash-"):
        m = re.search(r"series '([^']+)' vs '([^']+)'", row["table_or_section"])
        if not m:
            raise SystemExit(f"{rid}: no series in {row['table_or_section']!r}")
        return m.group(2), m.group(1)
    if rid.startswith("specter-"):
        return f"specter:{row['draft_method']}", ""
    if rid.startswith("dspark-"):
        return f"dspark:{row['target_model']}", ""
    for prefix in ("ngramh100", "trt11434", "dsv4mi355"):
        if rid.startswith(prefix + "-"):
            return prefix, ""
    raise SystemExit(f"{rid}: no deployment mapping")


def _short_image(text: str) -> str:
    text = text.strip()
    if "@sha256:" in text:
        return text.split("@sha256:")[0].split(":")[-1] + "@sha256:" + text.split("@sha256:")[1][:8]
    return text.split(":")[-1]


def _point_notes(row: dict) -> list[str]:
    """Per-point facts the dev row carries in its notes (dashboard acceptance rate, image tags, ITL)."""
    notes = []
    m = re.search(r"dashboard acceptance rate ([\d.]+%)", row["notes"])
    if m:
        notes.append(f"dashboard acceptance rate {m.group(1)}")
    images = re.findall(r"Docker: ([^\]|]+)\]", row["notes"])
    if len(images) == 2 and images[0].strip() != images[1].strip():
        notes.append(f"image off {_short_image(images[0])} / on {_short_image(images[1])}")
    m = re.search(r"ITL ([\d.]+) ?ms -> ([\d.]+) ?ms", row["notes"])
    if m:
        notes.append(f"ITL {m.group(1)} ms off / {m.group(2)} ms on (statistic not stated)")
    return notes


def _int_or_blank(text: str) -> str:
    text = (text or "").strip()
    return text if re.fullmatch(r"\d+", text) else ""


def dev_rows() -> list[dict]:
    with DEV.open(newline="") as fh:
        raw = list(csv.DictReader(fh))
    points: dict[tuple, dict] = {}
    for row in raw:
        key, _ = _dev_key(row)
        spec = DEV_DEPLOYMENTS[key]
        isl = spec.get("input_len") or _int_or_blank(row["input_len"])
        conc = row["load_value"].strip() if row["load_kind"] == "concurrency" else ""
        conc = str(int(float(conc))) if conc else ""
        pkey = (key, str(isl), conc)
        point = points.setdefault(
            pkey,
            {
                "spec": key,
                "input_len": str(isl),
                "concurrency": conc,
                "metrics": {},
                "acceptance_length": "",
                "point_notes": [],
                "order": len(points),
            },
        )
        metric = row["metric"]
        if metric not in METRICS:
            raise SystemExit(f"{row['id']}: metric {metric} has no column")
        stem = METRICS[metric]
        if stem in point["metrics"]:
            raise SystemExit(f"{row['id']}: duplicate {metric} at {pkey}")
        point["metrics"][stem] = (row["value_off"].strip(), row["value_on"].strip())
        al = row["acceptance_length"].strip()
        if al:
            if point["acceptance_length"] and point["acceptance_length"] != al:
                raise SystemExit(f"{row['id']}: acceptance {al} != {point['acceptance_length']} at {pkey}")
            point["acceptance_length"] = al
        for note in _point_notes(row):
            if note not in point["point_notes"]:
                point["point_notes"].append(note)
    out = []
    for point in sorted(points.values(), key=lambda p: p["order"]):
        spec = dict(DEV_DEPLOYMENTS[point["spec"]])
        fields = {
            f"{stem}_{arm}": v for stem, (off, on) in point["metrics"].items() for arm, v in (("off", off), ("on", on))
        }
        fields.update(
            concurrency=point["concurrency"], input_len=point["input_len"], acceptance_length=point["acceptance_length"]
        )
        out.append(_row(spec, fields, point["point_notes"], []))
    return out


def _merged(mapping: dict) -> dict:
    """`mapping` with its YAML merge key applied (`<<: *base` or `<<: [*a, *b]`; its own keys win, then the
    earlier base): BaseLoader leaves `<<` as a plain key."""
    bases = mapping.get("<<") or []
    bases = [bases] if isinstance(bases, dict) else bases
    if not isinstance(bases, list) or not all(isinstance(b, dict) for b in bases):
        raise SystemExit(f"{EXTRA.name}: {mapping.get('slug')}: `<<` takes a mapping or a list of them")
    out: dict = {}
    for base in reversed(bases):
        out.update(_merged(base))
    out.update((k, v) for k, v in mapping.items() if k != "<<")
    return out


def extra_rows() -> list[dict]:
    if not EXTRA.exists():
        return []
    # BaseLoader keeps every scalar as written (21.090 stays 21.090, not 21.09).
    data = yaml.load(EXTRA.read_text(), Loader=yaml.BaseLoader) or {}
    out = []
    for dep in map(_merged, data.get("deployments", [])):
        spec = {k: v for k, v in dep.items() if k != "points"}
        spec["notes"] = list(spec.get("notes") or [])
        bad = [n for n in spec["notes"] if not isinstance(n, str)]
        if bad:
            raise SystemExit(
                f"{EXTRA.name}: {dep.get('slug')}: a note parsed as {bad[0]!r}; quote notes containing ': '"
            )
        for point in dep["points"]:
            fields = {k: v for k, v in point.items() if k not in ("notes", "flags")}
            out.append(_row(spec, fields, list(point.get("notes") or []), list(point.get("flags") or [])))
    return out


def _fmt(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _slowdown(row: dict) -> bool:
    """Speculation loses at this point: lower output throughput (or, without it, higher mean/p99 TPOT)."""
    for stem, worse in (
        ("output_tok_s", lambda off, on: on < off),
        ("tpot_mean_ms", lambda off, on: on > off),
        ("tpot_p99_ms", lambda off, on: on > off),
    ):
        off, on = row[f"{stem}_off"], row[f"{stem}_on"]
        if off and on:
            return worse(float(off), float(on))
    return False


def _row(spec: dict, fields: dict, point_notes: list[str], point_flags: list[str]) -> dict:
    row = {c: "" for c in COLUMNS}
    for col in COLUMNS:
        if col in spec and col not in ("notes", "flags", "id"):
            row[col] = _fmt(spec[col])
    for col, value in fields.items():
        if col not in COLUMNS:
            raise SystemExit(f"unknown column {col!r} in {spec.get('slug')}")
        row[col] = _fmt(value)
    conc = row["concurrency"]
    if not row["num_prompts"] and spec.get("num_prompts_per_conc") and conc:
        row["num_prompts"] = str(int(spec["num_prompts_per_conc"]) * int(conc))
    flags = set(spec.get("flags") or []) | set(point_flags)
    if _slowdown(row):
        flags.add("SLOWDOWN")
    unknown = flags - set(FLAG_ORDER)
    if unknown:
        raise SystemExit(f"unknown flags {unknown} in {spec.get('slug')}")
    row["flags"] = " ".join(f for f in FLAG_ORDER if f in flags)
    row["notes"] = "; ".join(list(point_notes) + list(spec.get("notes") or []))
    isl, osl = row["input_len"], row["output_len"]
    shape = f"{isl or 'x'}-{osl or 'x'}"
    load = f"c{conc}" if conc else (f"r{row['rate_rps']}" if row["rate_rps"] else "cNA")
    row["id"] = f"{spec['group']}-{spec['slug']}-{shape}-{load}"
    return row


def build() -> str:
    rows = dev_rows() + extra_rows()
    ids = [r["id"] for r in rows]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise SystemExit(f"duplicate ids: {sorted(dupes)}")
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the CSV on disk is not what would be written")
    args = parser.parse_args(argv)
    text = build()
    if args.check:
        same = OUT.exists() and OUT.read_text() == text
        print(f"{OUT.relative_to(ROOT)}: {'up to date' if same else 'STALE'}")
        return 0 if same else 1
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}: {text.count(chr(10)) - 1} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())

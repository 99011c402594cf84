"""Catalogue checks for issue 20: Qwen3.8-27B (new file) and the weights DeepSeek-V4 occupies, each figure
against a sourced checkpoint size or engine log, under the precision spec that checkpoint / engine holds.

specsim counts the language model without the MTP layer (and without Qwen's vision tower); a checkpoint also
holds those, so specsim sits a few percent below each checkpoint total. Figures are GiB (2**30) unless noted.
"""

from __future__ import annotations

import json

import pytest

from specsim.cost.layout import Layout
from specsim.cost.model import catalogue_dir, load_model

GIB = 2**30
TOL = 0.05


def _rel(got: float, want: float) -> float:
    return abs(got - want) / want


# --- Qwen3.8-27B -------------------------------------------------------------------------------------------

def test_qwen38_27b_loads_by_the_serving_rows_name():
    # specsim/validation/data/serving.csv group dspark-a30-qwen38 names the model "Qwen3.8-27B"
    assert load_model("Qwen3.8-27B").name == load_model("qwen3.8-27b").name


def test_qwen38_27b_has_qwen36_27b_shapes():
    # Two write-ups of the official config.json: it differs from Qwen3.6-27B's only in transformers_version
    # (see the file's _specsim_note); mlx-community/Qwen3.8-27B-4bit's text_config equals qwen3.6-27b's.
    new = json.loads((catalogue_dir() / "qwen3.8-27b.json").read_text())
    old = json.loads((catalogue_dir() / "qwen3.6-27b.json").read_text())
    assert new["text_config"] == old["text_config"]
    assert new["transformers_version"] == "5.8.0.dev0"
    m = load_model("qwen3.8-27b")
    assert m.native_precision == "bf16"
    assert m.n_layers == 64 and m.n_linear_layers == 48 and m.n_attn_layers == 16
    assert m.hidden == 5120 and m.vocab == 248320


def test_qwen38_27b_bf16_bytes_match_the_checkpoint():
    # vllm-project/recipes@015a26cb models/Qwen/Qwen3.8-27B.yaml, variants.default:
    # "55,563,006,776 B on disk" (BF16, with the vision tower and the MTP layer, which specsim leaves out)
    m = load_model("qwen3.8-27b")
    assert _rel(m.weight_bytes("bf16"), 55_563_006_776) < TOL


# --- DeepSeek-V4-Flash -------------------------------------------------------------------------------------

def test_dsv4_flash_native_bytes_match_the_checkpoint():
    # vllm-project/vllm#40802 (issue description, vLLM log, weight_utils.py):
    # "Checkpoint size: 148.66 GiB" for deepseek-ai/DeepSeek-V4-Flash (FP4 experts + FP8 block, bf16 head)
    m = load_model("deepseek-v4-flash")
    assert m.native_precision == "fp8_block,experts=mxfp4,head=bf16"
    assert _rel(m.weight_bytes("native") / GIB, 148.66) < TOL


def test_dsv4_flash_fp8_bytes_match_the_sgl_project_checkpoint():
    # sgl-project/sglang#28620 (comment by xesdiny, 2026-07-02): the sgl-project/DeepSeek-V4-Flash-FP8 shards
    # "total about 294.04 GB (273.85 GiB) on disk": every expert FP8 (the FP4 experts re-packed), bf16 embeddings
    m = load_model("deepseek-v4-flash")
    assert _rel(m.weight_bytes("fp8_block,head=bf16") / GIB, 273.85) < TOL


@pytest.mark.xfail(strict=True, reason=(
    "SGLang holds ~2 GiB/GPU more than an even TP8 share of the checkpoint (273.85 GiB / 8 = 34.2 GiB incl. MTP), "
    "not itemised by the source (plausibly pieces SGLang replicates that specsim splits over tp: the one-head KV "
    "projection, compressors, indexers; not verified); "
    "specsim gives 33.6 GiB with MLA-style replicated pieces counted whole, -5.5%"))
def test_dsv4_flash_fp8_sglang_tp8_weights_per_gpu():
    # sgl-project/sglang#28620 (comment by xesdiny, 2026-07-02): 8x L20, TP8, sgl-project/DeepSeek-V4-Flash-FP8,
    # "Main DeepseekV4ForCausalLM weights used about 35.52 GB per TP rank" (SGLang prints GiB as "GB");
    # the MTP draft is loaded apart ("added about 1.06 GB per GPU")
    m = load_model("deepseek-v4-flash")
    assert _rel(m.weight_bytes_per_gpu("fp8_block,head=bf16", Layout(8)) / GIB, 35.52) < TOL


# --- DeepSeek-V4-Pro ---------------------------------------------------------------------------------------

def test_dsv4_pro_native_bytes_match_the_checkpoint():
    # vllm-project/recipes#779 (description, 2026-08-10): "865 GB of weights" (deepseek-ai/DeepSeek-V4-Pro,
    # decimal GB: does "not fit one GB200 NVL4 tray (768 GB)"); specsim leaves out the MTP layer (~14 GB)
    m = load_model("deepseek-v4-pro")
    assert _rel(m.weight_bytes("native"), 865e9) < TOL


def test_dsv4_pro_params_match_the_card():
    # deepseek-ai/DeepSeek-V4-Pro model card (quoted in antirez/ds4#112): 1.6T total, 49B activated
    m = load_model("deepseek-v4-pro")
    assert _rel(m.n_params(), 1.6e12) < TOL
    assert _rel(m.n_active_params(), 49e9) < TOL


def test_dsv4_pro_all_fp8_does_not_fit_an_h200_at_tp8():
    # why the 8x H200 run below cannot hold FP8 experts: all-FP8 weights exceed the card (141 GB)
    m = load_model("deepseek-v4-pro")
    assert m.weight_bytes_per_gpu("fp8_block", Layout(8)) > 141e9


@pytest.mark.xfail(strict=True, reason=(
    "unexplained: the log's 125.65 GiB/GPU is 1.27x the checkpoint's even TP8 share "
    "(865 GB / 8 = 100.7 GiB incl. MTP); "
    "specsim's native spec gives 99.6 GiB (-20.7%); no sourced engine format reproduces it (FP8 experts would be "
    "183 GiB, more than an H200 holds)"))
def test_dsv4_pro_sglang_h200_tp8_weights_per_gpu():
    # SemiAnalysisAI/InferenceX#2128 (description, 2026-07-09), container lmsysorg/sglang:deepseek-v4-hopper,
    # deepseek-ai/DeepSeek-V4-Pro, benchmarks/single_node/fixed_seq_len/dsv4_fp8_h200_sglang.sh
    # (@8eec0d4: --tp 8 --moe-runner-backend marlin, no DP attention, no SGLANG_DSV4_* env):
    # "Load weight end. quant=fp8, fmt=e4m3, avail mem=12.25 GB, mem usage=125.65 GB."
    m = load_model("deepseek-v4-pro")
    assert _rel(m.weight_bytes_per_gpu("native", Layout(8)) / GIB, 125.65) < TOL

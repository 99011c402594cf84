"""A checkpoint's own weight formats (`native`), its context window, and names a user mistypes (issue 30).

Expected formats are read off the published configs by hand (the exclude lists quoted below); byte counts
are hand arithmetic on config.json numbers, not specsim's output."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from specsim.cost.hf_common import checkpoint_precision, context_window
from specsim.cost.hf_config import decoder_blocks
from specsim.cost.model import aliases, available, catalogue_dir, checkpoints, load_model, parse_config
from specsim.errors import SpecsimError

GB = 1e9


def _cfg(name: str) -> dict:
    return json.loads((catalogue_dir() / f"{name}.json").read_text())


# --- the checkpoint's formats, per part ---------------------------------------------------------------------

@pytest.mark.parametrize(("hf_id", "expected"), [
    # hf_quant_config NVFP4; exclude_modules: every layer's linear_attn* (45) and self_attn* (15), the shared
    # experts, lm_head, mtp.layers.0*: only the routed experts are NVFP4
    ("nvidia/Qwen3.5-397B-A17B-NVFP4", "bf16,experts=nvfp4"),
    # NVFP4 excluding q_a / q_b / kv_a / kv_b of every MLA layer but not o_proj, which holds 128*128*7168 = 117.4M of
    # the layer's 187.0M weights (q_a 7168*1536, q_b 1536*128*192, kv_a 7168*576, kv_b 512*128*256): attention NVFP4;
    # "model.layers.61*" is the MTP layer (61 decoder layers); lm_head excluded
    ("nvidia/DeepSeek-V3.1-NVFP4", "nvfp4,head=bf16,mtp=bf16"),
    # "model.layers.0*", "model.layers.1.*": two of GLM's three dense layers whole; self_attn* and
    # shared_experts* of the MoE layers
    ("nvidia/GLM-5.1-NVFP4", "bf16,experts=nvfp4"),
    # MIXED_PRECISION: linear_attn in/out and self_attn q/k/v/o FP8, dense gate/up/down and lm_head W4A16_NVFP4,
    # mtp* excluded
    ("nvidia/Qwen3.6-27B-NVFP4", "nvfp4,attention=fp8,mtp=bf16"),
    # config.json: quant_method fp8 with weight_block_size [128, 128] and moe_quant_algo NVFP4
    ("nvidia/DeepSeek-V4-Pro-NVFP4", "fp8_block,experts=nvfp4,head=bf16"),
    # MIXED_PRECISION: MXFP8 attention / dense / shared experts, NVFP4 routed experts, lm_head excluded, no MTP entry
    ("nvidia/MiniMax-M3-NVFP4", "fp8,experts=nvfp4,head=bf16,mtp=bf16"),
    # compressed-tensors NVFP4 on Linear; ignore: lm_head and self_attn* of all 61 layers (dense layer 0's MLP kept)
    ("nvidia/Kimi-K2.5-NVFP4", "bf16,dense=nvfp4,experts=nvfp4"),
    # hf_quant_config {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}: everything FP8
    ("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8", "fp8"),
    ("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16", "bf16"),
    # zai-org config.json: fp8 block 128; modules_to_not_convert are norms, routers, indexer pieces, eh_proj, lm_head
    ("zai-org/GLM-5-FP8", "fp8_block,head=bf16"),
    ("glm-5-fp8", "fp8_block,head=bf16"),
    ("openai/gpt-oss-120b", "bf16,experts=mxfp4"),
    ("deepseek-ai/DeepSeek-V3", "fp8_block,head=bf16"),
    ("Qwen/Qwen3-235B-A22B-GPTQ-Int4", "int4,head=bf16"),
    ("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic", "fp8,head=bf16"),
    ("meta-llama/Llama-3.1-8B-Instruct", "bf16"),
])
def test_native_is_the_checkpoints_own(hf_id: str, expected: str) -> None:
    assert load_model(hf_id).native_precision == expected


def test_quantized_ids_keep_their_base_architecture_and_name_themselves() -> None:
    m = load_model("nvidia/Qwen3.5-397B-A17B-NVFP4")
    base = load_model("qwen3.5-397b-a17b")
    assert m.name == base.name and m.n_params() == base.n_params()
    assert (m.checkpoint, base.checkpoint) == ("nvidia/Qwen3.5-397B-A17B-NVFP4", "Qwen/Qwen3.5-397B-A17B")
    assert base.native_precision == "bf16"  # the official release is BF16


def test_the_catalogue_name_takes_its_source_release_format() -> None:
    # nemotron-3-super-120b-a12b.json is the -FP8 release's config; its format is in hf_quant_config.json only
    m = load_model("nemotron-3-super-120b-a12b")
    assert m.checkpoint == "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8" and m.native_precision == "fp8"


def test_nvfp4_bytes_by_hand() -> None:
    # Llama-3.1-70B (hidden 8192, 80 layers, 64 q / 8 kv heads of 128, FFN 28672, vocab 128256, untied) as
    # nvidia/Llama-3.1-70B-Instruct-FP8: modelopt FP8 everywhere but lm_head; fp8 = 1 byte, bf16 = 2
    per_layer = 8192 * (8192 + 2 * 1024) + 8192 * 8192 + 3 * 8192 * 28672
    table = 128256 * 8192
    m = load_model("nvidia/Llama-3.1-70B-Instruct-FP8")
    assert m.native_precision == "fp8,head=bf16"
    assert m.weight_bytes("native") == pytest.approx(80 * per_layer * 1 + 2 * table * 2, rel=1e-9)
    # Qwen3.5-397B-A17B-NVFP4: 60 MoE layers of 512 experts, hidden 4096, expert width 1024, gated: the routed
    # experts shrink from 2 bytes to NVFP4's 0.5 + 1/16 (e4m3 scale per 16), everything else stays bf16
    routed = 60 * 512 * 3 * 4096 * 1024
    nvfp4, bf16 = load_model("nvidia/Qwen3.5-397B-A17B-NVFP4"), load_model("qwen3.5-397b-a17b")
    saved = bf16.weight_bytes("native") - nvfp4.weight_bytes("native")
    assert saved == pytest.approx(routed * (2 - 0.5625), rel=0.01)  # the shared experts and router: < 1%
    assert nvfp4.weight_bytes("native") / GB == pytest.approx(235.8, abs=0.5)


def test_every_alias_that_names_a_format_has_one() -> None:
    """An id whose name says FP8 / NVFP4 / AWQ / GPTQ / INT4 / MXFP / W4A16 ... resolves to that format unless
    its catalogue file is that very release; none prices bf16 by accident."""
    marker = re.compile(r"fp8|nvfp4|awq|gptq|int4|int8|mxfp|w4a16|w8a8|fp4")
    for hf_id, name in aliases().items():
        if not marker.search(hf_id):
            continue
        m = load_model(hf_id)
        assert m.native_precision != "bf16", hf_id
        assert hf_id in checkpoints() or hf_id == load_model(name).checkpoint.lower(), hf_id


def test_checkpoint_table_is_sound() -> None:
    for hf_id, file in checkpoints().items():
        assert hf_id in aliases(), hf_id  # the architecture comes from aliases.yaml
        data = json.loads((catalogue_dir() / "checkpoints" / file).read_text())
        assert data["_specsim_source"] and {"quantization_config", "hf_quant_config", "precision"} & set(data)
    used = set(checkpoints().values())
    assert {p.name for p in (catalogue_dir() / "checkpoints").glob("*.json")} == used  # no orphan file


@pytest.mark.skipif(importlib.util.find_spec("aiconfigurator_core") is None, reason="needs the tables extra")
def test_verbatim_checkpoint_files_match_their_published_copies() -> None:
    """Files that say "(verbatim)" hold exactly the config aiconfigurator-core ships for that repo."""
    spec = importlib.util.find_spec("aiconfigurator_core")
    assert spec is not None and spec.submodule_search_locations
    copies = Path(next(iter(spec.submodule_search_locations))) / "model_configs"
    checked = 0
    for file in set(checkpoints().values()):
        data = json.loads((catalogue_dir() / "checkpoints" / file).read_text())
        found = re.search(r"model_configs/(\S+\.json) \(verbatim\)", data["_specsim_source"])
        if not found:
            continue
        published = json.loads((copies / found.group(1)).read_text())
        if "hf_quant_config" in data:
            assert data["hf_quant_config"] == published, file
        else:
            text = published.get("text_config", {})
            assert data["quantization_config"] == published.get("quantization_config",
                                                                 text.get("quantization_config")), file
        checked += 1
    assert checked >= 25


# --- the reader, on published snippets ----------------------------------------------------------------------

def test_awq_gptq_and_compressed_tensors_snippets() -> None:
    llama = load_model("llama-3.1-8b")
    blocks = decoder_blocks(llama)
    # transformers docs, quantization/awq.md: TheBloke/zephyr-7B-alpha-AWQ config.json quantization_config
    awq = {"quant_method": "awq", "zero_point": True, "group_size": 128, "bits": 4, "version": "gemm"}
    assert checkpoint_precision(awq, llama, blocks, "x") == ("int4,head=bf16", "AWQ 4-bit")
    gptq8 = {"quant_method": "gptq", "bits": 8, "group_size": 128, "desc_act": False, "sym": True}
    assert checkpoint_precision(gptq8, llama, blocks, "x")[0] == "int8,head=bf16"
    assert checkpoint_precision({**gptq8, "bits": 4, "lm_head": True}, llama, blocks, "x")[0] == "int4"
    # TensorRT-LLM tests/unittest (test_load_hf_quant_config_detects_nvfp4_w4a16_compressed_tensors)
    ct = {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "ignore": ["mtp.layers"],
          "config_groups": {"group_0": {"targets": ["Linear", "lm_head"], "input_activations": None,
                                        "weights": {"type": "float", "num_bits": 4, "strategy": "group",
                                                    "group_size": 16}}}}
    assert checkpoint_precision(ct, llama, blocks, "x") == ("nvfp4", "compressed-tensors nvfp4")
    # Linear int4 and FusedMoE nvfp4 in one config (a mixed llm-compressor scheme), on an MoE model
    qwen = load_model("qwen3-30b-a3b")
    mixed = {"quant_method": "compressed-tensors", "ignore": ["lm_head"], "config_groups": {
        "dense": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "group_size": 128}},
        "moe": {"targets": ["FusedMoE"], "weights": {"num_bits": 4, "type": "float", "group_size": 16}}}}
    assert checkpoint_precision(mixed, qwen, decoder_blocks(qwen), "x")[0] == "int4,experts=nvfp4,head=bf16"


@pytest.mark.parametrize(("quant", "named"), [
    ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "quantization method 'bitsandbytes'"),
    ({"quant_method": "gguf"}, "quantization method 'gguf'"),
    ({"bits": 4}, "quantization method ''"),
    ({"quant_method": "awq", "bits": 3}, "AWQ with 3 bits"),
    ({"quant_method": "modelopt", "quant_algo": "INT8_SQ"}, "quant_algo INT8_SQ"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": 2, "type": "int"}}}},
     "2 bits, type int"),
])
def test_unpriced_methods_are_refused_naming_method_and_model(quant: dict, named: str) -> None:
    m = load_model("llama-3.1-8b")
    with pytest.raises(SpecsimError) as err:
        checkpoint_precision(quant, m, decoder_blocks(m), "cfg.json")
    text = str(err.value)
    assert "\n" not in text and named in text and "llama-3.1-8b" in text and text.startswith("cfg.json: ")


def test_a_config_file_with_an_unknown_method_is_refused_not_bf16(tmp_path: Path) -> None:
    cfg = _cfg("llama-3.1-8b")
    cfg["quantization_config"] = {"quant_method": "hqq", "nbits": 4}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(SpecsimError, match=r"config.json: llama-3.1-8b's quantization method 'hqq' is not priced"):
        parse_config(cfg, "llama-3.1-8b", str(path))


# --- the label the doors echo -------------------------------------------------------------------------------

def test_precision_label() -> None:
    m = load_model("nvidia/Qwen3.5-397B-A17B-NVFP4")
    assert m.precision_label() == "bf16, experts nvfp4 (as shipped: modelopt NVFP4)"
    assert m.precision_label("bf16") == "bf16"
    assert load_model("deepseek-v3").precision_label("fp8,experts=nvfp4") == "fp8, experts nvfp4"
    assert load_model("llama-3.1-8b").precision_label() == "bf16 (as shipped)"
    assert load_model("qwen3.5-27b").precision_label("fp8,experts=nvfp4") == "fp8"  # a dense model has no experts
    for name in [*available(), *checkpoints()]:
        assert len(load_model(name).precision_label()) <= 76, name  # a table cell at 80 columns


# --- the context window -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "window"), [
    ("deepseek-v3", 4096 * 40),  # yarn: original_max_position_embeddings x factor (= max_position_embeddings)
    ("gpt-oss-120b", 4096 * 32),
    ("kimi-k2.5", 4096 * 64),
    ("llama-3.1-8b", 131_072),  # llama3 scaling is not multiplied (max_position_embeddings is already 128k)
    ("llama-2-7b", 4096),
    ("qwen3-8b", 40_960),
    ("vicuna-7b", 2048),
    ("qwen3.5-397b-a17b", 262_144),  # text_config
    ("deepseek-v4-pro", 65_536 * 16),
])
def test_context_window_as_vllm_derives_it(name: str, window: int) -> None:
    assert load_model(name).max_context_tokens == window


def test_context_window_rules() -> None:
    # QwenLM/Qwen3 README: YaRN rope_scaling {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings":
    # 32768} serves 131,072 tokens
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    assert context_window({**_cfg("qwen3-8b"), "rope_scaling": yarn}) == 131_072
    assert context_window({"max_position_embeddings": 8192, "seq_length": 4096}) == 4096  # smallest key wins
    assert context_window({"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 2.0}}) == 8192
    assert context_window({"hidden_size": 8}) == 0  # nothing stated: nothing checked
    assert all(load_model(n).max_context_tokens > 0 for n in available())


def test_check_context() -> None:
    m = load_model("llama-3.1-8b")
    m.check_context(131_072)
    m.check_context([1000, 131_072])
    with pytest.raises(SpecsimError, match=r"^llama-3.1-8b: context 200,000 tokens exceeds its 131,072-token window$"):
        m.check_context(200_000)
    with pytest.raises(SpecsimError, match=r"prompt \+ output 131,073 tokens"):
        m.check_context([5, 131_073], "prompt + output")


# --- names ----------------------------------------------------------------------------------------------------

def test_unknown_model_says_did_you_mean() -> None:
    with pytest.raises(SpecsimError, match=r"^unknown model 'llama-8b' \(did you mean .*llama-3\.1-8b.*\?\)$"):
        load_model("llama-8b")
    with pytest.raises(SpecsimError, match=r"did you mean nvidia/qwen3\.5-397b-a17b-nvfp4"):
        load_model("nvidia/Qwen3.5-397B-NVFP4")


def test_separator_spellings_resolve() -> None:
    assert load_model("Llama 3.1 8B").name == "llama-3.1-8b"
    assert load_model("Llama 3.1 8B").checkpoint == "meta-llama/Llama-3.1-8B"


def test_resolve_precision() -> None:
    m = load_model("openai/gpt-oss-120b")
    assert m.resolve_precision("native") == "bf16,experts=mxfp4"
    assert m.resolve_precision("FP8 , experts=nvfp4") == "fp8,experts=nvfp4"
    with pytest.raises(SpecsimError, match="unknown weight dtype 'fp7'"):
        m.resolve_precision("fp7")


def test_every_catalogue_name_and_alias_resolves_native() -> None:
    for name in [*available(), *aliases()]:
        m = load_model(name)
        assert m.resolve_precision("native") == m.native_precision, name  # canonical and parseable
        assert m.max_context_tokens > 0, name

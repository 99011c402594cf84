"""Catalogue breadth (issue #9): the newer model families, Hugging Face aliases and the added GPU profiles."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from specsim.cost.hardware import load_hardware, profiles_dir
from specsim.cost.hf_families import FAMILIES_2026
from specsim.cost.model import aliases, available, catalogue_dir, load_model, parse_config, resolve_name
from specsim.errors import SpecsimError

NEW_MODELS = {"vicuna-68m", "tinyllama-1.1b", "codellama-7b", "codellama-13b", "llama-3.3-70b",
              "deepseek-r1-distill-llama-8b", "qwen3-0.6b", "qwen3-8b", "qwen3-32b", "qwen3-30b-a3b",
              "qwen3-235b-a22b", "gpt-oss-20b", "gpt-oss-120b", "llama-4-scout", "llama-4-maverick", "kimi-k2"}
NEW_PROFILES = ("rtx-3090", "rtx-4090", "a10g", "l4", "h20", "mi325x", "mi355x", "b300", "gb200", "a100-pcie-80gb")


# Totals stated on the model cards / reports (an independent route to the shapes read from config.json).
@pytest.mark.parametrize(("name", "billions", "rel"), [
    ("vicuna-68m", 0.068, 0.02), ("tinyllama-1.1b", 1.1, 0.02), ("codellama-7b", 6.74, 0.01),
    ("codellama-13b", 13.0, 0.02), ("llama-3.3-70b", 70.6, 0.01), ("deepseek-r1-distill-llama-8b", 8.03, 0.01),
    ("qwen3-0.6b", 0.6, 0.02), ("qwen3-8b", 8.2, 0.02), ("qwen3-32b", 32.8, 0.02), ("qwen3-30b-a3b", 30.5, 0.02),
    ("qwen3-235b-a22b", 235.0, 0.02), ("gpt-oss-20b", 20.91, 0.01), ("gpt-oss-120b", 116.83, 0.01),
    ("llama-4-scout", 109.0, 0.02),  # the card's 109B includes the ~0.9B vision tower
    ("llama-4-maverick", 400.0, 0.02), ("kimi-k2", 1040.0, 0.02),
])
def test_new_models_match_published_sizes(name: str, billions: float, rel: float) -> None:
    assert load_model(name).n_params() / 1e9 == pytest.approx(billions, rel=rel)


@pytest.mark.parametrize(("name", "billions"), [
    ("qwen3-30b-a3b", 3.3), ("qwen3-235b-a22b", 22.0), ("llama-4-scout", 17.0), ("llama-4-maverick", 17.0),
    ("kimi-k2", 32.0),
])
def test_active_parameters_of_new_moe(name: str, billions: float) -> None:
    assert load_model(name).n_active_params() / 1e9 == pytest.approx(billions, rel=0.03)


def test_gpt_oss_active_and_qwen3_non_embedding_match_cards() -> None:
    # gpt-oss model card: 5.13B / 3.61B active, counting one of the two (untied) embedding matrices.
    for name, active in (("gpt-oss-120b", 5.13), ("gpt-oss-20b", 3.61)):
        m = load_model(name)
        assert (m.n_active_params() - m.vocab * m.hidden) / 1e9 == pytest.approx(active, rel=0.01)
    # Qwen3 cards state non-embedding parameters: 0.44B (0.6B, tied), 6.95B (8B), 31.2B (32B).
    for name, non_embedding in (("qwen3-0.6b", 0.44), ("qwen3-8b", 6.95), ("qwen3-32b", 31.2)):
        c = load_model(name).param_counts()
        assert (sum(c.values()) - c["embedding"] - c["lm_head"]) / 1e9 == pytest.approx(non_embedding, rel=0.02)


def test_new_families_parsed() -> None:
    assert load_model("qwen3-0.6b").head_dim == 128  # not hidden / heads = 64
    q = load_model("qwen3-30b-a3b")
    assert (q.family, q.n_experts, q.top_k, q.moe_intermediate, q.n_dense_layers, q.n_shared_experts) == \
        ("qwen3_moe", 128, 8, 768, 0, 0)
    g = load_model("gpt-oss-120b")
    assert (g.n_experts, g.top_k, g.moe_intermediate, g.head_dim, g.n_kv_heads) == (128, 4, 2880, 64, 8)
    assert (g.sliding_window, g.n_sliding_layers, g.n_full_attention_layers, g.attention_sinks) == (128, 18, 18, True)
    scout, mav = load_model("llama-4-scout"), load_model("llama-4-maverick")
    assert (scout.n_experts, scout.n_shared_experts, scout.n_dense_layers, scout.moe_intermediate) == (16, 1, 0, 8192)
    assert (mav.n_experts, mav.n_moe_layers, mav.n_dense_layers, mav.intermediate) == (128, 24, 24, 16384)
    assert scout.chunked_attention and (scout.sliding_window, scout.n_full_attention_layers) == (8192, 12)
    k = load_model("kimi-k2")
    assert k.family == "kimi_k2" and k.is_mla and (k.n_experts, k.n_dense_layers, k.mtp_layers, k.n_heads) == \
        (384, 1, 0, 64)


def test_existing_models_have_no_local_attention() -> None:
    # The new fields default to "off": every model before issue #9 (Mistral-7B included) costs as before.
    for name in set(available()) - NEW_MODELS:
        m = load_model(name)
        if m.family in FAMILIES_2026:  # issue 19's families (tests/cost/test_models_2026.py)
            continue
        assert (m.sliding_window, m.n_sliding_layers, m.chunked_attention, m.attention_sinks) == (0, 0, False, False)
        ctx = np.array([0.0, 100.0, 5000.0])
        assert np.allclose(m.kv_bytes_per_sequence(ctx, "fp8", 2), ctx * m.kv_bytes_per_token("fp8", 2))


def test_kv_bytes_per_sequence_windows_by_hand() -> None:
    # gpt-oss-120b: K+V x 8 KV heads x 64 dims x 2 bytes = 2,048 bytes per layer per token; 18 full layers hold
    # all 10,000 tokens, 18 sliding layers only the last 128.
    m = load_model("gpt-oss-120b")
    assert m.kv_bytes_per_sequence(10_000) == pytest.approx(2048 * (18 * 10_000 + 18 * 128))
    assert m.kv_bytes_per_sequence(100) == pytest.approx(100 * m.kv_bytes_per_token())  # shorter than the window
    full, local = load_model("llama-4-scout").attended_tokens([1000, 20_000])
    assert list(full) == [1000, 20_000] and list(local) == [1000, 8192]


def test_hugging_face_ids_resolve_case_insensitively() -> None:
    for hf_id, name in (("meta-llama/Llama-3.1-8B", "llama-3.1-8b"),
                        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
                        ("META-LLAMA/llama-2-7b-CHAT-hf", "llama-2-7b"), ("Qwen/Qwen3-30B-A3B", "qwen3-30b-a3b"),
                        ("deepseek-ai/DeepSeek-R1", "deepseek-v3"), ("deepseek-r1", "deepseek-v3"),
                        ("double7/vicuna-68m", "vicuna-68m"), ("openai/gpt-oss-120b", "gpt-oss-120b")):
        assert load_model(hf_id).name == name
        assert resolve_name(hf_id) == name
    assert load_model("Llama-3.1-8B").name == "llama-3.1-8b"  # catalogue names stay case-insensitive


def test_alias_table_is_sound() -> None:
    names = set(available())
    assert "aliases" not in names and names >= NEW_MODELS
    table = aliases()
    assert len(table) >= 80 and set(table.values()) <= names
    assert not set(table) & names  # an alias never shadows a catalogue name
    # every entry is a lower-cased org/name id, or a short name (deepseek-r1, glm-5.2-fp8) with no file of its own
    assert all(key == key.lower() and ("/" in key or key not in names) for key in table)


def test_unknown_id_points_at_the_alias_table() -> None:
    with pytest.raises(SpecsimError, match=r"unknown model 'acme/llm-9b'.*aliases.yaml"):
        load_model("acme/llm-9b")


def test_new_family_errors_name_file_and_field() -> None:
    cfg = json.loads((catalogue_dir() / "gpt-oss-20b.json").read_text())
    cfg["layer_types"] = cfg["layer_types"][:-1]
    with pytest.raises(SpecsimError, match=r"x.json: field 'layer_types' has 23 entries for 24 layers"):
        parse_config(cfg, "x", "x.json")
    scout = json.loads((catalogue_dir() / "llama-4-scout.json").read_text())
    del scout["text_config"]
    with pytest.raises(SpecsimError, match=r"x.json: missing field 'text_config'"):
        parse_config(scout, "x", "x.json")
    scout = json.loads((catalogue_dir() / "llama-4-scout.json").read_text())
    del scout["text_config"]["num_local_experts"]
    with pytest.raises(SpecsimError, match=r"x.json: text_config: missing field 'num_local_experts'"):
        parse_config(scout, "x", "x.json")


def test_every_new_config_names_its_source() -> None:
    readme = (catalogue_dir() / "README.md").read_text()
    for name in NEW_MODELS:
        cfg = json.loads((catalogue_dir() / f"{name}.json").read_text())
        assert "/" in cfg["_specsim_source"] and len(cfg["_specsim_note"]) > 40, name
        assert f"| {name} | {cfg['_specsim_source']} |" in readme, name


@pytest.mark.parametrize("name", NEW_PROFILES)
def test_new_profiles_load_with_sane_ridge_and_memory(name: str) -> None:
    hw = load_hardware(name)
    eff = hw.efficiency
    ridge = hw.peak("bf16") * eff.gemm_compute / (hw.mem_bw_bytes_per_s * eff.memory)  # FLOP per byte
    assert 20 < ridge < 500
    gb = hw.memory_bytes / 1e9
    assert 0.9 * gb < hw.total_memory_bytes / 2**30 <= gb  # CUDA's GiB sit just under the datasheet GB figure
    assert ("transferred from" in eff.source and "An estimate until calibrated" in eff.source) or (
        "NVIDIA's measured kernel tables" in eff.source)  # b300, gb200: fitted to aiconfigurator-core's tables
    if hw.peak_flops_per_s["fp8"]:
        assert hw.peak("fp8") == pytest.approx(2 * hw.peak("bf16"), rel=0.02)  # dense to dense


def test_consumer_tensor_rates_are_fp32_accumulate_dense() -> None:
    # GeForce parts run FP16/BF16 tensor math with FP32 accumulate (what PyTorch uses) at half the FP16-accumulate
    # rate: RTX 3090 71 (142 with FP16 accumulate, 285 sparse), RTX 4090 165.2 (330.3, 660.6 sparse).
    assert load_hardware("rtx-3090").peak("bf16") == pytest.approx(71.2e12)
    assert load_hardware("rtx-4090").peak("fp16") == pytest.approx(165.15e12)
    with pytest.raises(SpecsimError, match="no fp8"):
        load_hardware("rtx-3090").peak("fp8")
    assert load_hardware("b300").peak("int8") < 0.1 * load_hardware("b300").peak("fp8")  # Blackwell Ultra cut INT8
    for name in ("rtx-3090", "rtx-4090", "a10g", "l4"):
        ic = load_hardware(name).interconnect
        assert ic.kind.startswith("pcie") and ic.link_bw_bytes_per_s <= 32e9


_KEY_LINE = re.compile(r"^(\s*)([a-z0-9_]+):\s*(\S.*)?$")


@pytest.mark.parametrize("name", NEW_PROFILES)
def test_every_field_of_new_profiles_has_a_source_comment(name: str) -> None:
    path = profiles_dir() / f"{name}.yaml"
    data = yaml.safe_load(path.read_text())
    assert data["name"] == name
    for line in path.read_text().splitlines():
        if line.strip().startswith("source:"):
            break  # the folded efficiency.source text follows
        m = _KEY_LINE.match(line)
        if not m or m.group(2) in {"name", "description", "kind"}:
            continue
        value = (m.group(3) or "").split("#")[0].strip()
        if value or "#" in line:  # a scalar, or a block header that carries a note
            assert "#" in line and line.split("#", 1)[1].strip(), f"{name}.yaml: {line!r} has no source"


def test_profiles_dir_lists_every_new_profile() -> None:
    assert {p.stem for p in Path(profiles_dir()).glob("*.yaml")} >= set(NEW_PROFILES)

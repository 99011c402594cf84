from __future__ import annotations

import json
from pathlib import Path

import pytest

from specsim.cost.model import available, load_model
from specsim.errors import SpecsimError

REQUIRED = {"llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b",
            "llama-3.2-1b", "llama-3.2-3b", "vicuna-7b", "vicuna-13b", "vicuna-33b", "codellama-34b",
            "qwen2.5-0.5b", "qwen2.5-7b", "qwen2.5-72b", "qwen-72b", "internlm-20b", "phi-2",
            "mixtral-8x7b", "deepseek-v3"}


def test_catalogue_complete_and_loads() -> None:
    assert set(available()) >= REQUIRED
    for name in available():
        assert load_model(name).n_params() > 5e7  # the smallest, vicuna-68m, has 68M


@pytest.mark.parametrize(("name", "billions"), [
    ("llama-2-7b", 6.74), ("llama-2-70b", 68.98), ("llama-3.1-8b", 8.03), ("llama-3.1-70b", 70.55),
    ("llama-3.1-405b", 405.8), ("mixtral-8x7b", 46.70), ("deepseek-v3", 671.0), ("phi-2", 2.78),
])
def test_parameter_counts_match_published_sizes(name: str, billions: float) -> None:
    # Published totals (model cards); an independent check of the shapes read from config.json.
    assert load_model(name).n_params() / 1e9 == pytest.approx(billions, rel=0.01)


def test_active_parameters_of_moe() -> None:
    assert load_model("mixtral-8x7b").n_active_params() / 1e9 == pytest.approx(12.9, rel=0.02)  # Mixtral paper
    assert load_model("deepseek-v3").n_active_params() / 1e9 == pytest.approx(37.0, rel=0.03)  # V3 report


def test_kv_bytes_per_token_by_hand() -> None:
    # Llama-2-7B: 2 (K,V) x 32 layers x 32 heads x 128 dims x 2 bytes = 524,288
    assert load_model("llama-2-7b").kv_bytes_per_token("bf16") == 524_288
    # Llama-3.1-70B (GQA, 8 KV heads): 2 x 80 x 8 x 128 x 1 byte in fp8 = 163,840
    assert load_model("llama-3.1-70b").kv_bytes_per_token("fp8") == 163_840
    # DeepSeek-V3 MLA: 61 layers x (512 latent + 64 rope) x 2 bytes = 70,272
    assert load_model("deepseek-v3").kv_bytes_per_token("bf16") == 70_272


def test_families_parsed() -> None:
    assert not load_model("phi-2").gated_mlp
    assert load_model("qwen-72b").intermediate == 24576  # QWen counts both branches: 49152 / 2
    ds = load_model("deepseek-v3")
    assert ds.is_mla and ds.is_moe and ds.mtp_layers == 1 and ds.n_dense_layers == 3
    assert load_model("mixtral-8x7b").n_experts == 8


def test_bad_config_names_file_and_field(tmp_path: Path) -> None:
    cfg = json.loads((Path(__file__).parents[2] / "specsim/cost/models/llama-2-7b.json").read_text())
    del cfg["hidden_size"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(SpecsimError, match=r"config.json: missing field 'hidden_size'"):
        load_model(str(path))
    cfg["hidden_size"] = 4096
    cfg["model_type"] = "gpt2"
    path.write_text(json.dumps(cfg))
    with pytest.raises(SpecsimError, match=r"model_type.*'gpt2'.*llama"):
        load_model(str(path))
    path.write_text("{not json")
    with pytest.raises(SpecsimError, match="not valid JSON"):
        load_model(str(path))
    with pytest.raises(SpecsimError, match=r"^unknown model 'gpt-5' \(did you mean gpt-oss-20b, gpt-oss-120b\?\)$"):
        load_model("gpt-5")

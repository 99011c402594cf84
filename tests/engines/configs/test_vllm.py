"""vLLM's --speculative-config: the method's settings from its table, the tree alternative, the dynamic profile."""

from __future__ import annotations

import pytest

from specsim.engines.configs.bands import DRAFT_MODEL_PATH, Band, Bands, Speculation
from specsim.engines.configs.vllm import VLLM_METHOD, VLLM_SETTINGS, vllm_config
from specsim.records import Json

CHAIN = Bands.of([Band(1, 64, 3)])


def _cfg(spec: Speculation) -> dict[str, Json]:
    out = vllm_config(spec)
    assert isinstance(out, dict)
    cfg = out["--speculative-config"]
    assert isinstance(cfg, dict)
    return cfg


@pytest.mark.parametrize(("method", "extra"), [
    ("draft_model", {"model": "llama-1b", "draft_tensor_parallel_size": 2}),
    ("eagle3", {"model": "<eagle3 head for the target>"}),
    ("p_eagle", {"model": "<p_eagle head for the target>", "parallel_drafting": True}),
    ("ngram", {"prompt_lookup_max": 4, "prompt_lookup_min": 2}),
    ("mtp", {}),
])
def test_each_method_adds_its_own_settings(method: str, extra: dict[str, Json]) -> None:
    cfg = _cfg(Speculation(method, CHAIN, "llama-1b", 2))
    assert cfg == {"method": VLLM_METHOD[method], "num_speculative_tokens": 3, **extra}
    assert (method in VLLM_SETTINGS) == bool(extra)


def test_a_draft_model_without_a_name_or_own_tp() -> None:
    assert _cfg(Speculation("draft_model", CHAIN)) == {"method": "draft_model", "num_speculative_tokens": 3,
                                                        "model": DRAFT_MODEL_PATH}


def test_per_batch_chains_tree_alternative_and_dynamic_profile() -> None:
    bands = Bands.of([Band(1, 8, 4, 2, 6), Band(9, 32, 2)], [Band(1, 8, 4), Band(9, 32, 2)])
    paths = ((0,), (1,), (0, 0), (0, 1), (0, 0, 0), (0, 0, 0, 0))
    profile: dict[str, Json] = {"max_num_speculative_tokens": 4, "acceptance_rate_per_pos": [0.8, 0.6],
                                "batch_stats": {"1": {"0": 1.0}}, "context_tokens": 100, "source": "model"}
    out = vllm_config(Speculation("eagle3", bands, tree_paths=paths, dynamic_profile=profile))
    assert isinstance(out, dict)
    schedule = [[1, 8, 4], [9, 32, 2]]
    assert out["--speculative-config"] == {"method": "eagle3", "num_speculative_tokens": 4,
                                           "num_speculative_tokens_per_batch_size": schedule,
                                           "model": "<eagle3 head for the target>"}
    assert out["tree_alternative"] == {
        "up_to_batch": 8, "attention_backend": "TREE_ATTN",
        "--speculative-config": {"method": "eagle3", "num_speculative_tokens": 6,
                                 "model": "<eagle3 head for the target>", "speculative_token_tree": str(list(paths))}}
    assert out["dynamic_speculative_config"] == {"max_num_speculative_tokens": 4,
                                                 "acceptance_rate_per_pos": [0.8, 0.6],
                                                 "batch_stats": {"1": {"0": 1.0}},
                                                 "num_speculative_tokens_per_batch_size": schedule}


def test_dynamic_profile_of_one_chain_and_methods_vllm_does_not_run() -> None:
    out = vllm_config(Speculation("eagle", CHAIN, dynamic_profile={"max_num_speculative_tokens": 3}))
    assert isinstance(out, dict)
    assert out["dynamic_speculative_config"] == {"max_num_speculative_tokens": 3,
                                                 "num_speculative_tokens_per_batch_size": [[1, 64, 3]]}
    assert vllm_config(Speculation("lookahead", CHAIN)) is None

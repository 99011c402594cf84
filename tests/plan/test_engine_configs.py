"""A plan's policy handed to the engine homes: records as bands, the low-load tree's paths built here."""

from __future__ import annotations

from specsim.drafts.registry import METHODS
from specsim.engines.configs.bands import Band
from specsim.engines.configs.render import ENGINE_METHODS
from specsim.plan.engine_configs import engine_configs, tree_paths


def test_tree_paths_are_the_bands_eagle2_tree() -> None:
    paths = tree_paths(Band(1, 8, 4, 2, 6))
    assert len(paths) == 6 and max(map(len, paths)) <= 4 and all(max(p) < 2 for p in paths)


def test_records_with_and_without_tree_fields() -> None:
    tree = engine_configs("eagle3", [{"batch_from": 1, "batch_to": 8, "k": 4, "topk": 2, "num_draft_tokens": 6},
                                     {"batch_from": 9, "batch_to": 64, "k": 2}])
    vllm = tree["vllm"]
    assert isinstance(vllm, dict) and isinstance(vllm["tree_alternative"], dict)
    cfg = vllm["tree_alternative"]["--speculative-config"]
    assert isinstance(cfg, dict) and cfg["num_speculative_tokens"] == 6
    assert cfg["speculative_token_tree"] == str(tree_paths(Band(1, 8, 4, 2, 6)))
    trt = engine_configs("medusa", [{"batch_from": 1, "batch_to": 8, "k": 4, "topk": 2, "num_draft_tokens": 6,
                                     "verify_tokens": 7}])["trtllm"]
    assert isinstance(trt, dict) and trt["medusa_choices"] == [list(p) for p in tree_paths(Band(1, 8, 4, 2, 6))]


def test_only_a_plan_that_does_not_speculate_has_no_engine() -> None:
    """No engine running the method means no speculation: true of 'none' alone among the registered methods."""
    assert [m for m in METHODS if not any(m in methods for methods in ENGINE_METHODS)] == ["none"]
    assert engine_configs("none", [{"batch_from": 1, "batch_to": 8, "k": 3}])["vllm"] is None

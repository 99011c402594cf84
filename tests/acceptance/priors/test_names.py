"""The names acceptance is keyed by: the method registry, tasks, families, sizes."""

from __future__ import annotations

import pytest

from specsim.acceptance.priors import canonical_method, family_of, params_of_name, task_of_dataset
from specsim.acceptance.priors.names import METHODS, method_info


def test_names() -> None:
    assert canonical_method("EAGLE-3") == "eagle3" and canonical_method("pld") == "ngram"
    assert family_of("llama-3.1-70b") == "llama3" and family_of("qwen3-8b") == "qwen3"
    assert family_of("vicuna-7b") == "llama" and family_of("qwen3.6-27b") == "qwen3.6"
    assert params_of_name("llama-3.2-1b") == 1.0 and params_of_name("vicuna-68m") == pytest.approx(0.068)
    assert task_of_dataset("HumanEval") == "code" and task_of_dataset("specbench/overall") == "mixed"
    assert task_of_dataset("cnn-dm") == "summarisation" and task_of_dataset("gsm8k") == "math"


def test_every_alias_and_relation_names_a_registered_method() -> None:
    for info in METHODS.values():
        assert method_info(info.name) is info
        for alias in info.aliases:
            assert method_info(alias) is info and method_info(alias.upper()) is info, alias
        assert set(info.related) <= set(METHODS), info.name
        assert info.effect_class in ("head", "draft_model", "lookup")


def test_unknown_methods_get_the_defaults() -> None:
    info = method_info("warp")
    assert info.name == "warp" and "warp" not in METHODS
    assert info.decay_group == "iid" and info.effect_class == "head" and not info.checkpoint

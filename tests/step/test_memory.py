from __future__ import annotations

import numpy as np

from specsim.cost.hardware import load_hardware
from specsim.cost.model import load_model
from specsim.drafts.build import make_draft
from specsim.step.evaluate import Target, memory_per_gpu

L70 = load_model("llama-3.1-70b")
T = Target(load_hardware("h100-sxm"), L70, tp=8)


def test_the_draft_adds_its_family_s_weights_and_cache() -> None:
    """No draft and lookahead take no draft memory; an EAGLE-3 head takes weights and its own KV cache;
    a draft that does not speculate holds KV for its context + 1 token at any k."""
    plain = memory_per_gpu(T, make_draft("none", L70), 0, 10, 1000)
    none_k4 = memory_per_gpu(T, make_draft("none", L70), 4, 10, 1000)
    assert float(none_k4.draft_weights) == float(none_k4.draft_kv) == 0.0
    assert float(none_k4.kv_cache) == float(plain.kv_cache)
    look = memory_per_gpu(T, make_draft("lookahead", L70), 4, 10, 1000)
    assert float(look.draft_weights) == 0.0 and float(look.kv_cache) > float(plain.kv_cache)
    eagle = memory_per_gpu(T, make_draft("eagle3", L70), 4, 10, 1000)
    assert float(eagle.draft_weights) > 0.0 and float(eagle.draft_kv) > 0.0
    assert np.all(eagle.total > plain.total)

"""TensorRT-LLM's decoding config: the chain schedule, EAGLE's dynamic tree, Medusa's choices."""

from __future__ import annotations

from specsim.engines.configs.bands import Band, Bands, Speculation
from specsim.engines.configs.trtllm import trtllm_config

BANDS = Bands.of([Band(1, 8, 4, 2, 6), Band(9, 32, 2), Band(33, 64, 0)], [Band(1, 8, 4), Band(9, 32, 2)])
PATHS = ((0,), (1,), (0, 0))


def test_schedule_and_eagle_dynamic_tree() -> None:
    assert trtllm_config(Speculation("eagle3", BANDS, tree_paths=PATHS)) == {
        "decoding_type": "Eagle", "max_draft_len": 4, "draft_len_schedule": {"8": 4, "32": 2},
        "max_concurrency": 32,
        "tree_alternative": {"up_to_batch": 8, "use_dynamic_tree": True, "dynamic_tree_max_topK": 2,
                             "max_total_draft_tokens": 6, "max_draft_len": 4}}


def test_medusa_takes_the_tree_paths_other_methods_no_tree() -> None:
    medusa = trtllm_config(Speculation("medusa", BANDS, tree_paths=PATHS))
    assert isinstance(medusa, dict) and medusa["medusa_choices"] == [[0], [1], [0, 0]]
    lookahead = trtllm_config(Speculation("lookahead", BANDS, tree_paths=PATHS))
    assert isinstance(lookahead, dict) and set(lookahead) == {"decoding_type", "max_draft_len",
                                                              "draft_len_schedule", "max_concurrency"}
    assert trtllm_config(Speculation("suffix", BANDS)) is None

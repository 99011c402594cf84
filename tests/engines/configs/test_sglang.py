"""SGLang's flags: one server configuration per band, the root counted, the FA3 tree caveat on Hopper only."""

from __future__ import annotations

from specsim.engines.configs.bands import DRAFT_MODEL_PATH, Band, Bands, Speculation
from specsim.engines.configs.sglang import BANDS_NOTE, SGLANG_TREE_CAVEAT, sglang_config

TREE_THEN_CHAIN = Bands.of([Band(1, 8, 5, 4, 12), Band(9, 64, 3)])


def test_one_band_per_server_lowest_load_on_top() -> None:
    out = sglang_config(Speculation("eagle3", TREE_THEN_CHAIN))
    assert isinstance(out, dict)
    tree = {"--speculative-algorithm": "EAGLE3", "--speculative-num-steps": 5, "--speculative-eagle-topk": 4,
            "--speculative-num-draft-tokens": 13}
    chain = {"--speculative-algorithm": "EAGLE3", "--speculative-num-steps": 3, "--speculative-eagle-topk": 1,
             "--speculative-num-draft-tokens": 4}
    assert out == {**tree, "by_batch": [{"batch_from": 1, "batch_to": 8, **tree},
                                        {"batch_from": 9, "batch_to": 64, **chain}],
                   "note": BANDS_NOTE, "caveat": SGLANG_TREE_CAVEAT}


def test_caveat_only_on_hopper_and_draft_model_path() -> None:
    out = sglang_config(Speculation("eagle3", TREE_THEN_CHAIN, hopper_fa3=False))
    assert isinstance(out, dict) and "caveat" not in out
    one = sglang_config(Speculation("draft_model", Bands.of([Band(1, 64, 3)])))
    assert one == {"--speculative-algorithm": "STANDALONE", "--speculative-num-steps": 3,
                   "--speculative-eagle-topk": 1, "--speculative-num-draft-tokens": 4,
                   "--speculative-draft-model-path": DRAFT_MODEL_PATH}
    assert sglang_config(Speculation("medusa", TREE_THEN_CHAIN)) is None

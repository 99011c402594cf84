"""Every engine's configuration together, and the note."""

from __future__ import annotations

from specsim.engines.configs.bands import Band, Bands, Speculation
from specsim.engines.configs.render import ENGINES, render_configs


def test_engines_in_order_and_the_note() -> None:
    out = render_configs(Speculation("eagle3", Bands.of([Band(1, 8, 5, 4, 12), Band(9, 64, 3), Band(65, 99, 0)]),
                                     tree_paths=((0,),)))
    assert list(out) == [*ENGINES, "note"] and all(isinstance(out[name], dict) for name in ENGINES)
    assert out["note"] == "speculate up to batch 64; off above (low-load tree: topk 4, 12 nodes, depth 5)"
    lookahead = render_configs(Speculation("lookahead", Bands.of([Band(1, 64, 3)])))
    assert lookahead["vllm"] is None and lookahead["sglang"] is None and isinstance(lookahead["trtllm"], dict)
    assert lookahead["note"] == "speculate up to batch 64; off above"


def test_without_speculation_every_engine_is_off() -> None:
    off = {"vllm": None, "trtllm": None, "sglang": None, "note": "no speculation: leave speculative decoding off"}
    assert render_configs(Speculation("eagle3", Bands.of([Band(1, 64, 0), Band(65, 99, -1)]))) == off
    assert render_configs(Speculation("none", Bands.of([Band(1, 64, 3)]))) == off

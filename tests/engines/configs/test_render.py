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
    off = {"vllm": None, "trtllm": None, "sglang": None, "atom": None,
           "note": "no speculation: leave speculative decoding off"}
    assert render_configs(Speculation("eagle3", Bands.of([Band(1, 64, 0), Band(65, 99, -1)]))) == off
    assert render_configs(Speculation("none", Bands.of([Band(1, 64, 3)]))) == off


def test_atom_flags_per_band_and_its_chain_limit() -> None:
    """ATOM's server flags (atom/engine/arg_utils.py): --method, --num-speculative-tokens (at most 4 for MTP),
    one server per band; EAGLE-3 names its draft model; n-gram has no ATOM method."""
    cfg = render_configs(Speculation("mtp", Bands.of([Band(1, 16, 6), Band(17, 128, 2), Band(129, 512, 0)])))
    atom = cfg["atom"]
    assert isinstance(atom, dict)
    assert atom["--method"] == "mtp" and atom["--num-speculative-tokens"] == 4  # 6 cut to ATOM's max_spec
    assert [b["--num-speculative-tokens"] for b in atom["by_batch"]] == [4, 2]
    assert "at most 4" in atom["caveat"]
    eagle = render_configs(Speculation("eagle3", Bands.of([Band(1, 64, 3)]), draft_model="org/head"))["atom"]
    assert eagle == {"--method": "eagle3", "--num-speculative-tokens": 3, "--draft-model": "org/head"}
    assert render_configs(Speculation("ngram", Bands.of([Band(1, 64, 3)])))["atom"] is None

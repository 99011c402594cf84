"""The AMD ATOM profile: it loads, every figure is sourced, and it captures and pads as ATOM does."""

from __future__ import annotations

from specsim.engines.passes import graph_batch
from specsim.engines.profile import NUMBERS, load_engine


def test_atom_loads_with_every_number_sourced() -> None:
    e = load_engine("atom")
    assert e.name == "atom"
    for key in (*NUMBERS, "graph_sizes", "graph_padding", "allreduce", "draft_loop", "spec_sync", "ngram_empty_drafts"):
        assert e.sources.get(key, "").strip(), f"atom: {key} has no source"


def test_atom_captures_its_cli_default_sizes_in_requests() -> None:
    # atom/model_engine/arg_utils.py: --cudagraph-capture-sizes "[1,2,4,8,16,32,48,64,128,256,512]"; graphs keyed
    # (bs, mtp_k + 1) in model_runner.capture_cudagraph, so the sizes count requests
    e = load_engine("atom")
    assert e.graph_sizes == (1, 2, 4, 8, 16, 32, 48, 64, 128, 256, 512)
    assert e.cuda_graphs and e.graph_unit == "requests" and e.graph_padding


def test_atom_pads_a_batch_to_the_next_captured_size_and_runs_eager_above_512() -> None:
    # ForwardMode.decide (atom/utils/forward_context.py): next(x for x in graph_bs if x >= bs); eager above the
    # largest size. With k = 3 each request verifies 4 tokens, but the padding is per request.
    b, graphed = graph_batch(load_engine("atom"), [3, 33, 65, 129, 512, 513], 4)
    assert list(b) == [4, 48, 128, 256, 512, 513]
    assert list(graphed) == [True, True, True, True, True, False]


def test_atom_runs_an_eager_extend_then_decode_chain_under_its_async_loop() -> None:
    # eagle_proposer.py: one pass over the verified tokens, then k - 1 passes of B tokens, launched eagerly;
    # the deferred-output loop keeps speculation overlapped (spec_sync false)
    e = load_engine("atom")
    assert e.draft_loop == "extend_then_decode" and not e.draft_graphs
    assert e.async_scheduling and not e.spec_sync
    assert e.allreduce == "custom"

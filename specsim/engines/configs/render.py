"""A plan's speculation as every engine's configuration: vLLM, TensorRT-LLM, SGLang, and a note."""

from __future__ import annotations

from collections.abc import Callable

from specsim.engines.configs.atom import ATOM_METHOD, atom_config
from specsim.engines.configs.bands import Bands, Speculation
from specsim.engines.configs.sglang import SGLANG_ALGO, sglang_config
from specsim.engines.configs.trtllm import TRTLLM_TYPE, trtllm_config
from specsim.engines.configs.vllm import VLLM_METHOD, vllm_config
from specsim.records import Json

#: each engine's writer, in the order the configurations are written
ENGINES: dict[str, Callable[[Speculation], Json]] = {"vllm": vllm_config, "trtllm": trtllm_config,
                                                     "sglang": sglang_config, "atom": atom_config}
#: the methods each engine runs
ENGINE_METHODS = (VLLM_METHOD, TRTLLM_TYPE, SGLANG_ALGO, ATOM_METHOD)

#: Engines whose configuration runs a different tree shape per batch band: SGLang, one server per band, each with
#: its own --speculative-eagle-topk / --speculative-num-draft-tokens (sglang.py). vLLM changes only the chain length
#: with batch (num_speculative_tokens_per_batch_size); its speculative_token_tree is one static tree for every batch,
#: on the experimental TREE_ATTN backend (vllm.py). TensorRT-LLM likewise (draft_len_schedule; its EAGLE dynamic
#: tree is one shape: trtllm.py). ATOM drafts chains only (atom.py). Research loops (hf, gpt-fast) draft chains.
TREE_BAND_ENGINES = ("sglang",)


def runs_tree_bands(framework: str) -> bool:
    """Whether an engine (its framework: vllm, sglang, trtllm, "" for the others) runs a tree per batch band, so a
    plan for it may choose trees by batch (TREE_BAND_ENGINES)."""
    return framework in TREE_BAND_ENGINES


def _note(bands: Bands) -> str:
    low = bands.on[0]
    return f"speculate up to batch {bands.last_on}; off above" + (
        f" (low-load tree: topk {low.topk}, {low.num_draft_tokens} nodes, depth {low.k})" if low.is_tree else "")


def render_configs(spec: Speculation) -> dict[str, Json]:
    """{vllm, trtllm, sglang, note}: each engine's configuration (None where the engine does not run the
    method) and a note; without speculation (no band speculates, or no engine runs the method: a plan that
    does not speculate) every engine's is None."""
    if not spec.bands.on or not any(spec.method in methods for methods in ENGINE_METHODS):
        return {**dict.fromkeys(ENGINES), "note": "no speculation: leave speculative decoding off"}
    return {**{name: write(spec) for name, write in ENGINES.items()}, "note": _note(spec.bands)}

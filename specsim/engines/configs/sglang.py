"""SGLang's configuration of a plan: its server flags per batch band, and the FA3 tree caveat.

Knob names from SGLang's server flags (--speculative-num-steps / --speculative-eagle-topk /
--speculative-num-draft-tokens, the last counting the root token) (../shared/research/anchors.md §3).
SGLang has no per-batch schedule: it gets one server configuration per batch band of the policy (run the
band that matches the load, or route by load between servers).
"""

from __future__ import annotations

from collections.abc import Callable

from specsim.engines.configs.bands import DRAFT_MODEL_PATH, Band, Speculation
from specsim.records import Json

SGLANG_ALGO = {"draft_model": "STANDALONE", "ngram": "NGRAM", "eagle": "EAGLE", "eagle2": "EAGLE",
               "eagle3": "EAGLE3", "mtp": "NEXTN"}

#: SGLang's topk > 1 path runs on other kernels than its chains, and the model does not price that switch.
SGLANG_TREE_CAVEAT = (
    "topk > 1: on Hopper SGLang's default attention backend is FA3 only for chains (server_args "
    "is_no_spec_infer_or_topk_one), so a tree runs on FlashInfer, which is not modelled here; the SpecBundle "
    "dashboard (H200, Llama-3.1-8B EAGLE-3) measured topk 3-4 steps ~10% dearer than priced and small trees "
    "accepting less than a chain of the same budget: benchmark the topk 1 chain against it on your traffic")

BANDS_NOTE = ("SGLang fixes these per server: run the band that matches the load (or route by load between "
              "servers); the top-level flags are the lowest-load band's")


def _draft_model(spec: Speculation) -> dict[str, Json]:
    return {"--speculative-draft-model-path": spec.draft_model or DRAFT_MODEL_PATH}


#: what each method adds to a band's flags (a method not here adds nothing)
SGLANG_SETTINGS: dict[str, Callable[[Speculation], dict[str, Json]]] = {"draft_model": _draft_model}


def _topk(band: Band) -> int:
    """--speculative-eagle-topk: a tree's candidates per level, 1 for a chain."""
    return band.topk if band.is_tree else 1


def _tokens(band: Band) -> int:
    """SGLang --speculative-num-draft-tokens: the verified drafts plus the root token."""
    return (band.num_draft_tokens or band.k) + 1


def _band(spec: Speculation, band: Band) -> dict[str, Json]:
    flags: dict[str, Json] = {
        "batch_from": band.batch_from, "batch_to": band.batch_to,
        "--speculative-algorithm": SGLANG_ALGO[spec.method], "--speculative-num-steps": band.k,
        "--speculative-eagle-topk": _topk(band), "--speculative-num-draft-tokens": _tokens(band)}
    if spec.method in SGLANG_SETTINGS:
        flags.update(SGLANG_SETTINGS[spec.method](spec))
    return flags


def sglang_config(spec: Speculation) -> Json:
    """SGLang's flags for the plan: the lowest-load band's at the top, every band's under `by_batch` where
    there are several (None: SGLang does not run the method)."""
    if spec.method not in SGLANG_ALGO:
        return None
    bands = [_band(spec, band) for band in spec.bands.on]
    first = {key: v for key, v in bands[0].items() if key.startswith("--")}
    out: dict[str, Json] = {**first, "by_batch": [*bands], "note": BANDS_NOTE} if len(bands) > 1 else first
    if spec.hopper_fa3 and any(_topk(band) > 1 for band in spec.bands.on):
        out["caveat"] = SGLANG_TREE_CAVEAT
    return out

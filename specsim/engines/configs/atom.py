"""AMD ATOM's configuration of a plan: its server flags per batch band.

Knob names from ATOM's server arguments (ROCm/ATOM@ffdf3bb5 atom/engine/arg_utils.py): `--method
{mtp,eagle3,dspark}`, `--num-speculative-tokens N` (1-4 for MTP and EAGLE-3: config.py `max_spec = 4`),
`--draft-model PATH` (EAGLE-3 only; MTP uses the checkpoint's own layer). ATOM drafts chains only and has no
per-batch schedule: one server configuration per batch band, as for SGLang.
"""

from __future__ import annotations

from specsim.engines.configs.bands import DRAFT_MODEL_PATH, Band, Speculation
from specsim.records import Json

ATOM_METHOD = {"mtp": "mtp", "eagle3": "eagle3", "dspark": "dspark"}
#: the longest chain ATOM drafts for MTP and EAGLE-3 (config.py `max_spec`)
ATOM_MAX_K = 4
BANDS_NOTE = ("ATOM fixes these per server: run the band that matches the load (or route by load between servers); "
              "the top-level flags are the lowest-load band's")


def _band(spec: Speculation, band: Band) -> dict[str, Json]:
    k = min(band.k, ATOM_MAX_K) if spec.method in ("mtp", "eagle3") else band.k
    flags: dict[str, Json] = {"batch_from": band.batch_from, "batch_to": band.batch_to,
                              "--method": ATOM_METHOD[spec.method], "--num-speculative-tokens": k}
    if spec.method == "eagle3":
        flags["--draft-model"] = spec.draft_model or DRAFT_MODEL_PATH
    return flags


def atom_config(spec: Speculation) -> Json:
    """ATOM's flags for the plan: the lowest-load band's at the top, every band's under `by_batch` where there are
    several (None: ATOM does not run the method, or the plan's trees: ATOM drafts chains only)."""
    if spec.method not in ATOM_METHOD:
        return None
    bands = [_band(spec, band.as_chain()) for band in spec.bands.chain]
    first = {key: v for key, v in bands[0].items() if key.startswith("--")}
    out: dict[str, Json] = {**first, "by_batch": [*bands], "note": BANDS_NOTE} if len(bands) > 1 else first
    caveats = []
    if spec.bands.trees:
        caveats.append("ATOM drafts chains only: the plan's trees run as its chain schedule")
    if any(band.k > ATOM_MAX_K for band in spec.bands.chain) and spec.method in ("mtp", "eagle3"):
        caveats.append(f"ATOM drafts at most {ATOM_MAX_K} tokens for {spec.method}: longer chains are cut to it")
    if caveats:
        out["caveat"] = "; ".join(caveats)
    return out

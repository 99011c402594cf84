"""The model catalogue: a model by name, Hugging Face id or config.json path, as a ModelSpec.

`specsim/cost/models/` bundles configs (their sources in its README); `models/aliases.yaml` maps Hugging Face
ids (case-insensitive) to catalogue names; `models/checkpoints.yaml` names, for the ids whose weights differ in
format from their catalogue file's (NVIDIA's NVFP4 / FP8 releases, Qwen's -FP8 / -AWQ, RedHatAI's), a file under
`models/checkpoints/` with that checkpoint's quantization config as published. `hf_config` reads any config.json
it supports.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from specsim.cost.dtypes import check_precision
from specsim.cost.hf_common import checkpoint_precision
from specsim.cost.hf_config import FAMILIES, decoder_blocks, parse_config
from specsim.cost.model_spec import ModelSpec
from specsim.errors import SpecsimError
from specsim.files import is_file, parsed_once, read_mapping
from specsim.names import resolve_name as same_name
from specsim.names import unknown

__all__ = ["FAMILIES", "ModelSpec", "aliases", "available", "catalogue_dir", "checkpoints", "load_model",
           "parse_config", "resolve_name"]


def catalogue_dir() -> Path:
    return Path(str(resources.files("specsim.cost"))) / "models"


def available() -> list[str]:
    return sorted(p.stem for p in catalogue_dir().glob("*.json"))


def _id_table(file: str) -> dict[str, str]:
    where = catalogue_dir() / file
    table: dict[str, str] = {}
    for key, value in read_mapping(where).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise SpecsimError(f"{where}: each entry must be 'hf-org/name: value', got {key!r}: {value!r}")
        table[key.lower()] = value
    return table


@lru_cache(maxsize=1)
def aliases() -> dict[str, str]:
    """Hugging Face ids (lower case) -> catalogue names, from models/aliases.yaml. Instruct/chat
    variants map to their base architecture; not listed by available()."""
    return {key: value.lower() for key, value in _id_table("aliases.yaml").items()}


@lru_cache(maxsize=1)
def checkpoints() -> dict[str, str]:
    """Hugging Face ids (lower case) whose weights differ in format from their catalogue file's -> the file
    under models/checkpoints/ holding that checkpoint's quantization config (models/checkpoints.yaml)."""
    return _id_table("checkpoints.yaml")


def _match(name: str) -> str:
    """The catalogue name or alias key (lower case) `name` means: itself, or the one name spelt the same but for
    case and separators ("Llama 3.1 8B"); `name` lower-cased when none is."""
    key = name.lower()
    if key in aliases() or is_file(catalogue_dir() / f"{key}.json"):
        return key
    return same_name(key, [*available(), *aliases()]) or key


def resolve_name(name: str) -> str:
    """The catalogue name for a catalogue name or a Hugging Face id (case-insensitive; a spelling that differs
    only in separators when exactly one name has it); the input lower-cased when it is neither."""
    key = _match(name)
    return aliases().get(key, key)


def load_model(name_or_path: str | Path) -> ModelSpec:
    """A catalogue model by name or Hugging Face id (case-insensitive), or a config.json by path; an unknown
    name is refused with the nearest catalogue names and ids. A checkpoint listed in models/checkpoints.yaml
    brings its own weight formats (native_precision); `checkpoint` names the id as given."""
    text = str(name_or_path)
    path = Path(text)
    if is_file(path / "config.json"):
        return _load_model_file(path / "config.json")
    if text.endswith(".json") or is_file(path):
        return _load_model_file(path)
    key = _match(text)
    name = aliases().get(key, key)
    if not is_file(catalogue_dir() / f"{name}.json"):
        raise unknown("model", text, [*available(), *aliases()], listing="specsim models list",
                      also="a Hugging Face id listed in specsim/cost/models/aliases.yaml, or a path to a config.json")
    base = _load_model_file(catalogue_dir() / f"{name}.json")
    own = key if key in checkpoints() else base.checkpoint.lower()
    spec = _with_checkpoint(base, checkpoints()[own]) if own in checkpoints() else base
    return dataclasses.replace(spec, checkpoint=text if key == text.lower() else key) if key in aliases() else spec


def _with_checkpoint(base: ModelSpec, file: str) -> ModelSpec:
    """`base` with the weight formats of a checkpoint file: its `quantization_config` (config.json's; null for
    an unquantized release), its `hf_quant_config` (ModelOpt's hf_quant_config.json), or, where neither was
    published where it could be read, a `precision` spec and `method` its `_specsim_source` states."""
    path = catalogue_dir() / "checkpoints" / file
    data = _load_checkpoint(path)
    if "precision" in data:
        spec = check_precision(str(data["precision"]))
        return dataclasses.replace(base, native_precision=spec, native_method=str(data.get("method", "")))
    quant = data.get("quantization_config", data.get("hf_quant_config"))
    native, method = checkpoint_precision(quant, base, decoder_blocks(base), str(path))
    return dataclasses.replace(base, native_precision=native, native_method=method)


@parsed_once
def _load_checkpoint(path: Path) -> dict[str, Any]:
    data = read_mapping(path)
    if not isinstance(data.get("_specsim_source"), str) or not \
            {"quantization_config", "hf_quant_config", "precision"} & set(data):
        raise SpecsimError(f"{path}: a checkpoint file needs _specsim_source and one of quantization_config, "
                           "hf_quant_config or precision")
    return data


@parsed_once
def _load_model_file(path: Path) -> ModelSpec:
    name = path.stem if path.name != "config.json" else path.parent.name
    cfg = read_mapping(path)
    try:
        return parse_config(cfg, name, str(path))
    except SpecsimError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, ZeroDivisionError) as exc:
        # an optional field of the wrong type (e.g. a list where a count belongs): bad input, not a crash
        raise SpecsimError(f"{path}: malformed config ({type(exc).__name__}: {exc})") from None

"""The model catalogue: a model by name, Hugging Face id or config.json path, as a ModelSpec.

`specsim/cost/models/` bundles configs (their sources in its README), and `models/aliases.yaml` maps
Hugging Face ids (case-insensitive) to catalogue names; `hf_config` reads any config.json it supports.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

from specsim.cost.hf_config import FAMILIES, parse_config
from specsim.cost.model_spec import ModelSpec
from specsim.errors import SpecsimError
from specsim.files import is_file, parsed_once, read_mapping

__all__ = ["FAMILIES", "ModelSpec", "aliases", "available", "catalogue_dir", "load_model", "parse_config",
           "resolve_name"]


def catalogue_dir() -> Path:
    return Path(str(resources.files("specsim.cost"))) / "models"


def available() -> list[str]:
    return sorted(p.stem for p in catalogue_dir().glob("*.json"))


@lru_cache(maxsize=1)
def aliases() -> dict[str, str]:
    """Hugging Face ids (lower case) -> catalogue names, from models/aliases.yaml. Instruct/chat
    variants map to their base architecture; not listed by available()."""
    where = catalogue_dir() / "aliases.yaml"
    data = read_mapping(where)
    table: dict[str, str] = {}
    for key, value in data.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise SpecsimError(f"{where}: each entry must be 'hf-org/name: catalogue-name', got {key!r}: {value!r}")
        table[key.lower()] = value.lower()
    return table


def resolve_name(name: str) -> str:
    """The catalogue name for a catalogue name or a Hugging Face id (case-insensitive); the input
    lower-cased when it is neither."""
    key = name.lower()
    if is_file(catalogue_dir() / f"{key}.json"):
        return key
    return aliases().get(key, key)


def load_model(name_or_path: str | Path) -> ModelSpec:
    """A catalogue model by name or Hugging Face id (case-insensitive), or a config.json by path."""
    text = str(name_or_path)
    path = Path(text)
    if is_file(path / "config.json"):
        path = path / "config.json"
    elif not (text.endswith(".json") or is_file(path)):
        path = catalogue_dir() / f"{resolve_name(text)}.json"
        if not is_file(path):
            raise SpecsimError(f"unknown model '{text}' (known: {', '.join(available())}; a Hugging Face id "
                               "listed in specsim/cost/models/aliases.yaml; or a path to a config.json)")
    return _load_model_file(path)


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

"""Reading YAML and JSON files into plain dicts, with errors that name the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from specsim.errors import SpecsimError


def read_mapping(path: Path) -> dict[str, Any]:
    """Parse a YAML or JSON file whose top level is a mapping; SpecsimError names the file."""
    if not path.is_file():
        raise SpecsimError(f"{path}: no such file")
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SpecsimError(f"{path}: not valid {path.suffix.lstrip('.').upper() or 'YAML'}: {first}") from None
    if not isinstance(data, dict):
        raise SpecsimError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def require(data: dict[str, Any], key: str, where: str, kind: type | tuple[type, ...] = (int, float)) -> Any:
    """data[key], checked present and of the given type; SpecsimError names file and field."""
    if key not in data or data[key] is None:
        raise SpecsimError(f"{where}: missing field '{key}'")
    value = data[key]
    if isinstance(value, bool) and kind in ((int, float), int, float):
        raise SpecsimError(f"{where}: field '{key}' must be a number, got {value!r}")
    if not isinstance(value, kind):
        raise SpecsimError(f"{where}: field '{key}' has the wrong type ({type(value).__name__}): {value!r}")
    return value


def positive(data: dict[str, Any], key: str, where: str) -> float:
    """A required number > 0."""
    value = float(require(data, key, where))
    if not value > 0:
        raise SpecsimError(f"{where}: field '{key}' must be > 0, got {value}")
    return value

"""A place in a scenario file and the reading of one field there: errors that name the file, the line and the
field (``chat.yaml line 14: traffic.prompt: field 'sigma' must be a number >= 0, got -1``), and an unknown key
refused with the nearest known one."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import yaml

from specsim.errors import SpecsimError
from specsim.names import did_you_mean

T = TypeVar("T")


def yaml_lines(text: str) -> dict[str, int]:
    """Dotted path (list items by index: 'traffic.workloads.0.share') -> 1-based line of its key or item."""
    out: dict[str, int] = {}

    def walk(node: yaml.Node, path: str) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                sub = f"{path}.{key.value}" if path else str(key.value)
                out[sub] = key.start_mark.line + 1
                walk(value, sub)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                sub = f"{path}.{i}"
                out[sub] = item.start_mark.line + 1
                walk(item, sub)

    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return out
    if root is not None:
        walk(root, "")
    return out


@dataclass(frozen=True)
class Where:
    """A place in a file: file name, dotted path, and the line map for messages."""

    file: str
    path: str = ""
    lines: Mapping[str, int] | None = None

    def at(self, key: str | int) -> Where:
        return Where(self.file, f"{self.path}.{key}" if self.path else str(key), self.lines)

    def error(self, message: str, key: str | None = None) -> SpecsimError:
        """'FILE line N: PATH: MESSAGE', N the line of PATH.key (or the nearest enclosing entry)."""
        line = None
        if self.lines:
            probe = f"{self.path}.{key}" if key and self.path else (key or self.path)
            while probe and line is None:
                line = self.lines.get(probe)
                probe = probe.rpartition(".")[0]
        loc = f"{self.file} line {line}" if line else self.file
        return SpecsimError(f"{loc}: {self.path}: {message}" if self.path else f"{loc}: {message}")

    def build(self, make: Callable[[], T], key: str | None = None) -> T:
        """make(), with a constructor's SpecsimError re-raised at this place (the field it names, if any)."""
        try:
            return make()
        except SpecsimError as exc:
            msg = str(exc)
            named = msg.split("'")[1] if msg.startswith("field '") else key
            raise self.error(msg, named) from None


def mapping(raw: object, where: Where, what: str) -> dict[str, object]:
    if not isinstance(raw, dict):
        raise where.error(f"expected a mapping ({what}), got {raw!r}")
    return raw


def only(raw: Mapping[str, object], where: Where, allowed: set[str]) -> None:
    """Refuse a key that no field of this section claims, naming the nearest (else every allowed one)."""
    unknown = sorted(map(str, set(raw) - allowed))
    if unknown:
        hint = did_you_mean(unknown[0], allowed) or f" (allowed: {', '.join(sorted(allowed))})"
        raise where.error(f"unknown field '{unknown[0]}'{hint}", unknown[0])


def number(raw: Mapping[str, object], key: str, where: Where, default: Any = None, lo: float | None = None,
            integer: bool = False, strict_lo: bool = False) -> Any:
    if key not in raw or raw[key] is None:
        if default is None:
            raise where.error(f"missing field '{key}'", key)
        return default
    value = raw[key]
    kind = "an integer" if integer else "a number"
    bound = "" if lo is None else f" {'>' if strict_lo else '>='} {lo:g}"
    if (isinstance(value, bool) or not isinstance(value, int | float) or not finite(value)
            or (integer and not float(value).is_integer())
            or (lo is not None and not (value > lo if strict_lo else value >= lo))):
        raise where.error(f"field '{key}' must be {kind}{bound}, got {value!r}", key)
    return int(value) if integer else float(value)


def finite(value: float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer beyond any float
        return False

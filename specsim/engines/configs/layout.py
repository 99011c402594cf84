"""Engine configurations as files people read: ENGINE_CONFIG_DIR/ENGINE.json, laid out by `pretty_json`."""

from __future__ import annotations

import json
from collections.abc import Mapping

from specsim.records import Json

ENGINE_CONFIG_DIR = "engine-configs"
JSON_WIDTH = 100


def pretty_json(value: Json, width: int = JSON_WIDTH) -> str:
    """JSON for people: a mapping or list that fits in `width` characters stays on one line, a longer one
    puts each entry on its own indented line, and a long list of numbers or strings is packed several to a
    line (a `speculative_token_tree`, a `batch_stats` row). Valid JSON: `json.loads` gives `value` back."""
    return _pretty(value, 0, width, width)


def _dumps(value: object) -> str:
    return json.dumps(value, default=float, ensure_ascii=False)


def _number(v: Json) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _flat(v: list[Json]) -> bool:
    """A short list of scalars (a [from, to, k] row)."""
    return all(not isinstance(x, dict | list) for x in v) and len(json.dumps(v, default=float)) <= 40


def _packs(value: dict[str, Json] | list[Json], row: bool) -> bool:
    """Packed several to a line: a list of numbers, strings or short flat lists, a table row, a row of numbers;
    one entry per line: a mapping of settings (the engine's flags)."""
    if isinstance(value, list):
        return all(not isinstance(v, dict) and (not isinstance(v, list) or _flat(v)) for v in value)
    return (all(not isinstance(v, dict | list) for v in value.values())
            and (row or all(_number(v) for v in value.values())))


def _packed(items: list[str], inner: int, width: int) -> str:
    """`items` several to a line, indented by `inner`, each line within `width`."""
    lines: list[str] = []
    line = ""
    for item in items:
        if line and len(line) + 2 + len(item) > width - inner - 1:
            lines.append(line + ",")
            line = item
        else:
            line = f"{line}, {item}" if line else item
    lines.append(line)
    return "\n".join(" " * inner + x for x in lines)


def _pretty(value: Json, indent: int, room: int, width: int, row: bool = False) -> str:
    """`value` at `indent`, on one line when it fits in `room`; `row`: an element of a list (a table row)."""
    flat = _dumps(value)
    if len(flat) <= room or not isinstance(value, dict | list) or not value:
        return flat
    inner = indent + 2
    pad = " " * inner
    if _packs(value, row):
        body = _packed([f"{_dumps(str(k))}: {_dumps(v)}" for k, v in value.items()] if isinstance(value, dict)
                       else [_dumps(v) for v in value], inner, width)
    elif isinstance(value, dict):
        parts = []
        for k, v in value.items():
            key = _dumps(str(k)) + ": "
            parts.append(pad + key + _pretty(v, inner, width - inner - len(key) - 1, width))
        body = ",\n".join(parts)
    else:
        body = ",\n".join(pad + _pretty(v, inner, width - inner - 1, width, row=True) for v in value)
    opening, closing = "{}" if isinstance(value, dict) else "[]"
    return f"{opening}\n{body}\n{' ' * indent}{closing}"


def engine_config_files(configs: Mapping[str, Json]) -> dict[str, str]:
    """Each engine's configuration as a file, ENGINE_CONFIG_DIR/ENGINE.json, laid out by `pretty_json` (the report
    writes them beside itself, `specsim plan --engine-configs DIR` into DIR)."""
    return {f"{ENGINE_CONFIG_DIR}/{name}.json": pretty_json(cfg) + "\n" for name, cfg in configs.items()
            if isinstance(cfg, dict)}

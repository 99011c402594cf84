"""Typed results as JSON-ready values: the one serialiser of specsim's answers.

Dataclass fields are written in their declared order under their own names (a field whose metadata sets
``omit_none`` is left out while None); tuples become lists, numpy scalars and arrays Python numbers and
lists; mappings keep their keys. JSON, CSV and Markdown writers start from these records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

#: JSON data, as records and the files written from them hold it
Json = dict[str, "Json"] | list["Json"] | str | int | float | bool | None

#: field metadata: leave the field out of the record while it is None
OMIT_NONE = {"omit_none": True}


def to_record(value: object) -> Any:
    """`value` as plain JSON-ready data (dicts, lists, numbers, strings, None)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_record(getattr(value, f.name)) for f in dataclasses.fields(value)
                if not (f.metadata.get("omit_none") and getattr(value, f.name) is None)}
    if isinstance(value, Mapping):
        return {k: to_record(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_record(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value

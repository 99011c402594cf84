"""A lookup's question, read and checked: the method's registry entry, the target's and draft's names,
family and size, the task, the temperature and the reference shape."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from specsim.acceptance.priors.fields import num
from specsim.acceptance.priors.names import (
    METHODS,
    TASKS,
    MethodInfo,
    family_of,
    method_info,
    params_of_name,
    task_of_dataset,
)
from specsim.acceptance.priors.shapes import Shape, as_shape, chain_shape
from specsim.acceptance.trees import Tree
from specsim.errors import SpecsimError


@dataclass(frozen=True)
class Question:
    """What a lookup was asked, in the catalogue's terms."""

    info: MethodInfo
    target: str  # the target's name ("" when not given)
    family: str | None
    params: float | None  # target parameters, billions
    draft: str | None  # the draft checkpoint or draft model's name (None when not given)
    draft_params: float | None
    task: str  # the asked task; chat when not given
    task_stated: bool
    dataset: str  # the asked benchmark, normalised ("" when a bare task was asked)
    temperature: float | None
    ref: Shape  # the shape asked about: the reference for choosing and for the band

    @property
    def method(self) -> str:
        return self.info.name


def ask(method: str, target: Any = None, draft: Any = None, task: str | None = None,
        temperature: float | None = None, shape: Any = None) -> Question:
    """The question a lookup answers, or a SpecsimError naming what is wrong with it."""
    info = method_info(method)
    if info.name not in METHODS:
        raise SpecsimError(f"no acceptance prior for method {method!r} (known: {', '.join(sorted(METHODS))})")
    if temperature is not None and not (0.0 <= float(temperature) <= 2.0):
        raise SpecsimError(f"temperature must lie in [0, 2], got {temperature!r}")
    tname, fam, params = requested_target(target)
    t = task_of_dataset(task) if task else None
    if task and t is None:
        raise SpecsimError(f"unknown task {task!r} (known: {', '.join(TASKS)})")
    ref = as_shape(shape) if shape is not None and not isinstance(shape, Tree) else chain_shape(5)
    if isinstance(shape, Tree):
        ref = Shape("tree", shape.depth, int(np.max(shape.ranks, initial=0)) + 1, shape.num_nodes)
    draft_name, draft_params = _draft_of(draft)
    dataset = norm_dataset(task) if task and str(task).lower() not in TASKS else ""
    return Question(info, tname, fam, params, draft_name, draft_params, t or "chat", t is not None, dataset,
                    temperature, ref)


def requested_target(target: Any) -> tuple[str, str | None, float | None]:
    """(name, family, parameters in billions) of a target given as a name or a ModelSpec."""
    if target is None:
        return "", None, None
    if isinstance(target, str):
        return target, family_of(target), params_of_name(target)
    name = str(getattr(target, "name", target))
    params = None
    if hasattr(target, "n_params"):
        try:
            params = float(target.n_params()) / 1e9
        except Exception:  # a partial spec without sizes: fall back to the name
            params = None
    return name, family_of(name), params or params_of_name(name)


def _draft_of(draft: Any) -> tuple[str | None, float | None]:
    if draft is None:
        return None, None
    if isinstance(draft, str):
        return draft, params_of_name(draft)
    if isinstance(draft, Mapping):
        name = str(draft.get("name") or "")
        p = num(draft.get("params_b"))
        return name, p if p is not None else params_of_name(name)
    name, _, params = requested_target(draft)
    return name, params


@cache
def norm_dataset(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", str(name).lower())

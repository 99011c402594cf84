"""Draft trees read from YAML or JSON files, with optional acceptance probabilities by (depth, rank)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specsim.acceptance.trees import FloatArray, Tree, as_prob_matrix
from specsim.errors import SpecsimError


@dataclass(frozen=True)
class TreeSpec:
    """A tree read from a file, with optional acceptance probabilities by (depth, rank)."""

    tree: Tree
    probs: FloatArray | None = None
    source: str = ""


def load_tree(path: str | Path) -> TreeSpec:
    """Read ``{parents: [...]}`` (or ``{paths: [[0], [0, 1], ...]}``) from YAML or JSON.

    Optional ``acceptance``: a list of lists, ``acceptance[d][r]`` = P(rank-r child at depth d+1 is
    accepted | parent accepted), or one list used at every depth.
    """
    from specsim.files import read_structured  # refuses folders, binary, non-UTF-8, empty and deeply nested files
    from specsim.structured import kind_of

    p = Path(path)
    if not p.exists():
        raise SpecsimError(f"{p}: no such tree file")
    data = read_structured(p)
    if isinstance(data, list):
        data = {"parents": data}
    if not isinstance(data, dict):
        raise SpecsimError(f"{p}: a tree file needs a 'parents' list (or 'paths'), got {kind_of(data)}")
    if not {"parents", "paths"} & set(data):
        has = ", ".join(sorted(map(str, data))) or "no fields"
        raise SpecsimError(f"{p}: a tree file needs a 'parents' list (or 'paths'); it has {has}")
    try:
        if "parents" in data:
            raw = data["parents"]
            if not isinstance(raw, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in raw):
                raise SpecsimError("'parents' must be a list of integers (-1 = root)")
            tree = Tree.from_parents(raw)
        else:
            tree = Tree.from_paths(data["paths"])
        probs = None
        if data.get("acceptance") is not None:
            probs = np.asarray(data["acceptance"], dtype=np.float64)
            as_prob_matrix(probs)  # validate; a 1-D vector stays 1-D (applies at every depth)
    except SpecsimError as exc:
        raise SpecsimError(f"{p}: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise SpecsimError(f"{p}: bad tree data: {exc}") from None
    return TreeSpec(tree, probs, str(p))

from __future__ import annotations

from pathlib import Path

import pytest

from specsim.acceptance.tree_files import load_tree
from specsim.errors import SpecsimError
from tests.acceptance.test_trees import SEED_PARENTS

DATA = Path(__file__).parents[1] / "data"


def test_load_tree_file() -> None:
    spec = load_tree(DATA / "tree_seed.yaml")
    assert spec.tree.parents == tuple(SEED_PARENTS)
    assert spec.probs is not None and float(spec.tree.expected_tokens(spec.probs)) == pytest.approx(2.53)
    with pytest.raises(SpecsimError, match="not a tree"):
        load_tree(DATA / "tree_cycle.yaml")
    with pytest.raises(SpecsimError, match="no such tree file"):
        load_tree(DATA / "absent.yaml")


def test_load_tree_json_and_bad_fields(tmp_path: Path) -> None:
    f = tmp_path / "t.json"
    f.write_text('{"paths": [[0], [0, 0], [1]]}')
    assert load_tree(f).tree.num_nodes == 3
    f.write_text('{"nodes": [1, 2]}')
    with pytest.raises(SpecsimError, match="'parents'"):
        load_tree(f)
    f.write_text('{"parents": [-1, "x"]}')
    with pytest.raises(SpecsimError, match="integers"):
        load_tree(f)

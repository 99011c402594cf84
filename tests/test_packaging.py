"""The package list in pyproject.toml names every subpackage: a non-editable install (a wheel) ships only
what it names, and an editable install would not notice one left out."""

from __future__ import annotations

import tomllib

from tests.corpus.harness import ROOT


def test_every_subpackage_is_listed() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "specsim").rglob("__init__.py")}
    assert found - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert listed - found == {"specsim.hardware_profiles"}  # mapped from hardware_profiles/ by package-dir

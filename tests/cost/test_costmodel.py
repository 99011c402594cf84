"""The cost-model protocol and its choice per profile (specsim/cost/costmodel.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from specsim.cost import costmodel as cmod
from specsim.cost.forward import forward_time_s
from specsim.cost.hardware import load_hardware
from specsim.cost.model import load_model
from specsim.errors import SpecsimError


@pytest.fixture(scope="module")
def h100():
    return load_hardware("h100-sxm")


def test_profile_yaml_selects_the_backend(tmp_path: Path) -> None:
    import yaml

    from specsim.cost.hardware import profiles_dir

    data = yaml.safe_load((profiles_dir() / "h100-sxm.yaml").read_text())
    data["cost_model"] = {"backend": "table", "framework": "sglang", "measurements": "m.csv"}
    p = tmp_path / "mine.yaml"
    p.write_text(yaml.safe_dump(data))
    hw = load_hardware(str(p))
    assert hw.cost_model.backend == "table" and hw.cost_model.measurements == str(tmp_path / "m.csv")
    assert cmod.describe(hw).startswith("table (") and cmod.describe(load_hardware("h100-sxm")) == "roofline"
    data["cost_model"] = "abacus"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecsimError, match=r"cost_model\.backend must be one of roofline, table"):
        load_hardware(str(p))


def test_forward_time_unchanged_by_default_cost_model(h100) -> None:
    m = load_model("llama-3.1-8b")
    explicit = dataclasses.replace(h100, cost_model=dataclasses.replace(h100.cost_model, backend="roofline"))
    assert forward_time_s(explicit, m, 4, 2, 2048)[()] == pytest.approx(forward_time_s(h100, m, 4, 2, 2048)[()])

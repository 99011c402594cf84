"""A deployment file: written and read back to the same values, refused in one line where malformed, and applied
at every door the same way (its question fills what is not given; another deployment's question is refused)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from specsim.errors import SpecsimError
from specsim.fields import Given, fields_of
from specsim.scenario.deployment import Deployment, apply_to_mapping, deployment_text, fill, load_deployment
from specsim.step.evaluate import StepCalibration

DEP = Deployment({"hardware": "h100-sxm", "model": "llama-3.1-8b", "engine": "vllm", "tp": 1, "draft": "eagle3",
                  "k": 3, "input_len": 1000, "output_len": 200},
                 StepCalibration(1.25, 1.1, 0.9, 0.4, 0.05), (0.8, 0.6, 0.5), "counters", 0.05,
                 {"host_ms": {"value": 1.25, "sd": 0.1}}, ({"run": "a", "arm": "off"},), ("a.json",))


@pytest.fixture
def dep(tmp_path: Path) -> Path:
    path = tmp_path / "deployment.yaml"
    path.write_text(deployment_text(DEP))
    return path


def test_round_trip(dep: Path) -> None:
    back = load_deployment(dep)
    assert back.calibration == DEP.calibration
    assert back.alphas == DEP.alphas and back.question == DEP.question and back.sigma_log == DEP.sigma_log
    assert back.mapping() == DEP.mapping()


@pytest.mark.parametrize(("edit", "words"), [
    (lambda m: m.update(format="other/1"), "not a deployment file"),
    (lambda m: m.update(extra=1), "unknown key 'extra'"),
    (lambda m: m["question"].update(colour="red"), "unknown field 'colour'"),
    (lambda m: m["acceptance"].update(alphas=[1.5]), "rates in"),
    (lambda m: m["calibration"].update(pass_scale="fast"), "pass_scale"),
    (lambda m: m["question"].pop("draft"), "at least hardware, model and draft"),
])
def test_refused_in_one_line(dep: Path, edit, words: str) -> None:  # type: ignore[no-untyped-def]
    m = yaml.safe_load(dep.read_text())
    edit(m)
    dep.write_text(yaml.safe_dump(m))
    with pytest.raises(SpecsimError, match=words) as exc:
        load_deployment(dep)
    assert "\n" not in str(exc.value)


def _given(door: str, **typed: object) -> Given:
    values = {f.name: f.default for f in fields_of(door)}
    values.update(typed)
    return Given(values, frozenset(typed))


def test_fill_gives_the_deployments_question(dep: Path) -> None:
    g = fill(_given("evaluate", deployment=dep, batch=8), "evaluate")
    assert (g["hardware"], g["model"], g["draft"], g["k"]) == ("h100-sxm", "llama-3.1-8b", "eagle3", 3)
    assert g["alphas"] == "0.8,0.6,0.5" and g.given("alphas")
    assert g["batch"] == 8  # what the user gave stays
    # a field the user gave wins; k is not a field that names the deployment
    assert fill(_given("evaluate", deployment=dep, k=2), "evaluate")["k"] == 2
    # another draft: the deployment's acceptance is not its acceptance
    other = fill(_given("evaluate", deployment=dep, draft="ngram"), "evaluate")
    assert not other.given("alphas")
    # simulate's door takes the runs' lengths
    assert fill(_given("simulate", deployment=dep), "simulate")["input_len"] == 1000


@pytest.mark.parametrize(("field", "value"), [("hardware", "h200"), ("model", "qwen3-8b"), ("tp", 2),
                                              ("engine", "sglang")])
def test_another_deployment_is_refused(dep: Path, field: str, value: object) -> None:
    with pytest.raises(SpecsimError, match="asks about another deployment"):
        fill(_given("evaluate", deployment=dep, **{field: value}), "evaluate")


def test_the_same_deployment_by_another_name(dep: Path) -> None:
    # a GPU, a model or an engine spelt another way is the same deployment
    g = fill(_given("evaluate", deployment=dep, model="meta-llama/Llama-3.1-8B-Instruct"), "evaluate")
    assert g["hardware"] == "h100-sxm"


def test_calibration_for_another_draft(dep: Path) -> None:
    d = load_deployment(dep)
    assert d.calibration_for("eagle3") == d.calibration
    other = d.calibration_for("ngram")
    assert other.spec_host_ms == 0.0 and other.pass_scale == d.calibration.pass_scale
    assert other.verify_scale == d.calibration.verify_scale  # the target's verification pass, whatever drafts
    # its speculative step was not fitted: its bands take the engine's measured spreads
    assert other == dataclasses.replace(d.calibration, spec_host_ms=0.0, sigma_log=None)
    off_only = dataclasses.replace(d, arms=("off",))
    assert off_only.calibration_for("eagle3").sigma_log is None


def test_scenario_mapping(dep: Path, tmp_path: Path) -> None:
    data, cal = apply_to_mapping({"deployment": str(dep), "drafts": ["eagle3", "ngram"]}, "s.yaml", tmp_path)
    assert cal == DEP.calibration_for("ngram") and data["hardware"] == "h100-sxm"  # one target for both drafts
    assert apply_to_mapping({"deployment": str(dep), "drafts": ["eagle3"]}, "s.yaml", tmp_path)[1] == DEP.calibration
    assert data["drafts"][0]["acceptance"] == {"alphas": [0.8, 0.6, 0.5]}
    assert "acceptance" not in data["drafts"][1]
    with pytest.raises(SpecsimError, match="field 'model'"):
        apply_to_mapping({"deployment": str(dep), "model": "qwen3-8b"}, "s.yaml", tmp_path)
    assert apply_to_mapping({"hardware": "h100-sxm"}, "s.yaml", tmp_path) == ({"hardware": "h100-sxm"}, None)


def test_another_cost_model_is_refused(dep: Path) -> None:
    with pytest.raises(SpecsimError, match="--cost-model prices the step another way"):
        fill(_given("evaluate", deployment=dep, cost_model="table"), "evaluate")

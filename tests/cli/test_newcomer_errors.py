"""Issue 30, "errors a newcomer can act on": did-you-mean for GPUs, engines and options, a safe spelling
resolved, YAML/JSON errors with line and column, an empty file named as empty, a missing extra naming the
extra and its install command; every refusal one line on stderr, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specsim.cli.main import extra_missing
from specsim.cost.hardware import available as hardware_names
from specsim.cost.hardware import hardware_name, load_hardware, profiles_dir
from specsim.engines.profile import available as engine_names
from specsim.engines.profile import engine_name, engines_dir, load_engine
from specsim.errors import SpecsimError, import_extra, missing_extra
from specsim.files import read_mapping, read_structured, read_yaml_mapping
from specsim.names import did_you_mean, nearest, normalised, resolve_name, unknown
from specsim.structured import kind_of, load_structured
from tests.corpus.harness import ROOT, Result, invoke, snapshot

EVAL = ("evaluate", "-m", "llama-3.1-8b", "-d", "eagle3", "--k", "3", "-f", "json")


def refused(r: Result, *expect: str) -> str:
    """The one stderr line of a refusal (exit 2), checked to hold every `expect`."""
    assert r.code == 2, f"exit {r.code}: {r.err!r}"
    assert r.err.startswith("error: ") and r.err.count("\n") == 1, r.err
    assert "Traceback" not in r.err and "internal error" not in r.err, r.err
    for s in expect:
        assert s in r.err, f"{s!r} not in {r.err!r}"
    return r.err


# --- the helper --------------------------------------------------------------------------------------------

def test_resolve_name_takes_only_a_safe_spelling() -> None:
    hw = hardware_names()
    assert resolve_name("h100-sxm", hw) == "h100-sxm"
    assert resolve_name("H100-SXM", hw) == resolve_name("h100_sxm", hw) == resolve_name("H100 SXM", hw) == "h100-sxm"
    assert resolve_name("RTX4090", hw) == "rtx-4090"
    # a prefix, a near miss or another product is never taken: h100 is two GPUs, l40 is not the l40s
    for given in ("h100", "H100-SXM5", "l40", "a100", "a100-sxm", "mi300", "", "   "):
        assert resolve_name(given, hw) is None, given
    assert resolve_name("vLLM", engine_names()) == "vllm"
    assert resolve_name("TRT-LLM", engine_names()) == "trtllm"
    assert resolve_name("sglang-04", engine_names()) is None  # a version is spelt exactly
    # two known names the same but for case: neither is guessed
    assert resolve_name("ab", ["A-b", "a_B"]) is None
    assert normalised(" H100_SXM ") == "h100sxm"


def test_nearest_names_the_parts_a_newcomer_meant() -> None:
    hw = hardware_names()
    assert nearest("A100", hw) == ["a100-pcie-80gb", "a100-sxm-40gb", "a100-sxm-80gb"]
    assert nearest("h100", hw) == ["h100-pcie", "h100-sxm"]
    assert nearest("H100-SXM5", hw)[0] == "h100-sxm"
    assert nearest("H100 80GB", hw) == ["h100-sxm", "h100-pcie"]
    assert nearest("l40", hw)[0] == "l40s"
    assert nearest("sglang-04", engine_names()) == ["sglang", "sglang-0.4"]
    assert nearest("zzzzzz", hw) == [] and nearest("", hw) == []
    assert did_you_mean("hardwre", ["hardware", "model"]) == " (did you mean hardware?)"
    assert did_you_mean("zzz", ["hardware"]) == ""


def test_unknown_is_one_line_with_suggestions_or_the_list() -> None:
    hw = hardware_names()
    assert str(unknown("hardware", "A100", hw)) == \
        "unknown hardware 'A100' (did you mean a100-pcie-80gb, a100-sxm-40gb, a100-sxm-80gb?)"
    msg = str(unknown("hardware", "xyz", hw, also="or a path to a YAML"))
    assert msg.startswith("unknown hardware 'xyz' (known: a100-pcie-80gb, ") and msg.endswith("; or a path to a YAML)")
    many = [f"model-{i}" for i in range(100)]
    assert str(unknown("model", "qqq", many, listing="specsim models list")) == \
        "unknown model 'qqq' (100 known: specsim models list lists them)"
    fields = ["memory_utilization", "max_num_seqs"]
    assert str(unknown("field", "memory_utilisation", fields, where="s.yaml: serving")) == \
        "s.yaml: serving: unknown field 'memory_utilisation' (did you mean memory_utilization?)"
    assert "\n" not in str(unknown("engine", "a\nb", ["vllm"]))


# --- the commands a newcomer types -------------------------------------------------------------------------

@pytest.mark.parametrize(("given", "expect"), [
    ("A100", "unknown hardware 'A100' (did you mean a100-pcie-80gb, a100-sxm-40gb, a100-sxm-80gb?)"),
    ("h100", "unknown hardware 'h100' (did you mean h100-pcie, h100-sxm?)"),
    ("H100-SXM5", "unknown hardware 'H100-SXM5' (did you mean h100-sxm, h100-pcie?)"),
])
def test_unknown_gpu_names_the_nearest(given: str, expect: str) -> None:
    refused(invoke(*EVAL, "-H", given), expect)
    refused(invoke("hardware", "show", given), expect)


def test_gpu_and_engine_spelt_otherwise_resolve_to_the_same_answer() -> None:
    base = invoke(*EVAL, "-H", "h100-sxm", "-e", "vllm")
    assert base.code == 0, base.err
    priced = {k: v for k, v in json.loads(base.out).items() if k not in ("hardware", "engine")}  # the echo aside
    assert len(priced) > 10
    for hw, engine in (("H100-SXM", "vllm"), ("h100_sxm", "vLLM"), ("H100 SXM", "VLLM")):
        r = invoke(*EVAL, "-H", hw, "-e", engine)
        assert r.code == 0, r.err
        assert {k: v for k, v in json.loads(r.out).items() if k not in ("hardware", "engine")} == priced
    assert load_hardware("H100-SXM") is load_hardware("h100-sxm")
    assert load_engine("SGLang-0.4").name == load_engine("sglang-0.4").name


def test_the_echo_name_is_the_bundled_one() -> None:
    assert hardware_name("H100-SXM") == hardware_name("h100_sxm") == "h100-sxm"
    assert engine_name("vLLM") == "vllm" and engine_name(" TRT-LLM ") == "trtllm"
    assert hardware_name("my/gpu.yaml") == "my/gpu.yaml" and engine_name("e.yaml") == "e.yaml"
    with pytest.raises(SpecsimError, match=r"^unknown hardware 'h100' \(did you mean h100-pcie, h100-sxm\?\)$"):
        hardware_name("h100")
    with pytest.raises(SpecsimError, match=r"^unknown engine 'vllm-0.9' \(did you mean vllm, vllm-0.10\?\)$"):
        engine_name("vllm-0.9")


def test_unknown_engine_names_the_nearest() -> None:
    refused(invoke(*EVAL, "-H", "h100-sxm", "-e", "sglang-04"), "unknown engine 'sglang-04' (did you mean sglang, "
            "sglang-0.4?)")
    refused(invoke("engines", "show", "tensorrt-llm"), "did you mean trtllm?")
    refused(invoke("engines", "show", "qqqq"), "known: atom, ", "or a path to a YAML")


def test_misspelt_option_and_command_say_did_you_mean() -> None:
    refused(invoke(*EVAL, "--hardwre", "h100-sxm"), "No such option: --hardwre (did you mean --hardware?)",
            "(try: specsim evaluate --help)")
    refused(invoke("evalute", "-H", "h100-sxm"), "Did you mean 'evaluate'")
    refused(invoke("hardware", "shw", "h100-sxm"), "Did you mean 'show'")


# --- files: line and column, empty, not a mapping ----------------------------------------------------------

def test_yaml_error_names_line_and_column(tmp_path: Path) -> None:
    bad = tmp_path / "s.yaml"
    bad.write_text("model: llama-3.1-8b\ndrafts: [eagle3, ngram\nload: {batch: 4}\n")
    with pytest.raises(SpecsimError) as e:
        read_mapping(bad)
    assert str(e.value) == (f"{bad} line 3 column 5: not valid YAML: did not find expected ',' or ']' "
                            "(while parsing a flow sequence from line 2 column 9)")
    bad.write_text("model: x\n\tload: 1\n")
    with pytest.raises(SpecsimError, match=r"s.yaml line 2 column 1: not valid YAML: found a tab character"):
        read_mapping(bad)
    bad.write_text("\tload: 1\n")
    with pytest.raises(SpecsimError, match=r"s.yaml line 1 column 1: .*\(a tab: YAML indents with spaces\)"):
        read_mapping(bad)
    bad.write_text("hardware: h100-sxm\nmodel: a\nhardware: b200\n")
    with pytest.raises(SpecsimError, match=r"s.yaml line 3 column 1: not valid YAML: key 'hardware' given twice "
                                           r"\(first at line 1\)"):
        read_mapping(bad)
    bad.write_text("base: &b {x: 1}\nmine:\n  <<: *b\n  x: 2\n")  # a merge key overriding is not a repeat
    assert read_mapping(bad) == {"base": {"x": 1}, "mine": {"x": 2}}
    js = tmp_path / "c.json"
    js.write_text('{\n  "a" 1\n}\n')  # a message Python 3.11 and 3.13 word alike (a trailing comma's differs)
    with pytest.raises(SpecsimError, match=r"c.json line 2 column 7: not valid JSON: Expecting ':' delimiter"):
        read_mapping(js)


@pytest.mark.parametrize(("text", "expect"), [
    ("", ": empty"), ("\n  \n", ": empty"), ("# only a comment\n---\n", ": empty"),
    ("- a\n- b\n", ": expected a mapping of fields (key: value lines), got a list"),
    ("h100-sxm\n", ": expected a mapping of fields (key: value lines), got a string ('h100-sxm')"),
    ("3\n", "got a number (3)"), ("null\n", "got nothing (null)"),
])
def test_empty_and_not_a_mapping(tmp_path: Path, text: str, expect: str) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(SpecsimError) as e:
        read_yaml_mapping(path)
    if expect.startswith(":"):
        assert str(e.value) == f"{path}{expect}"
    else:
        assert str(e.value).startswith(f"{path}: expected a mapping of fields") and expect in str(e.value)
    assert kind_of(True) == "true (a yes/no value)"


def test_read_yaml_mapping_gives_the_text_read_once(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("a: 1\nb: [2]\n")
    data, text = read_yaml_mapping(path)
    assert data == {"a": 1, "b": [2]} and text == "a: 1\nb: [2]\n"
    path.write_text("a: b: c\n")
    with pytest.raises(SpecsimError, match=r"^my scenario line 1 column 5: not valid YAML: mapping values are not"):
        read_yaml_mapping(path, "my scenario")
    t = path.with_name("t.json")
    t.write_text("[0, 0]")
    assert read_structured(t) == [0, 0] and load_structured("[1, 2]", "w") == [1, 2]


READERS = [  # (what, file name, command with {f})
    ("scenario", "s.yaml", ["plan", "{f}"]),
    ("scenario-sweep", "s.yaml", ["sweep", "{f}", "-o", "{d}/out.csv"]),
    ("hardware", "hw.yaml", ["hardware", "show", "{f}"]),
    ("hardware-H", "hw.yaml", [*EVAL, "-H", "{f}"]),
    ("engine", "e.yaml", ["engines", "show", "{f}"]),
    ("engine-e", "e.yaml", [*EVAL, "-H", "h100-sxm", "-e", "{f}"]),  # needs advise/evaluate.py to take a Path
    ("tree", "t.yaml", ["evaluate", "-c", "0.05", "--alpha", "0.7", "--tree", "{f}"]),
    ("acceptance", "a.yaml", ["evaluate", "-c", "0.05", "--k", "3", "--acceptance", "{f}"]),
]


@pytest.mark.parametrize(("what", "name", "cmd"), READERS, ids=[r[0] for r in READERS])
@pytest.mark.parametrize(("text", "expect"), [
    ("", ": empty"),
    ("# nothing here\n", ": empty"),
    ("a: [1, 2\nb: 3\n", " line 2 column 2: not valid YAML: did not find expected ',' or ']'"),
    ("a: 1\na: 2\n", " line 2 column 1: not valid YAML: key 'a' given twice"),
    ("a: 1\n!!binary eA==: 2\n", " line 2 column 1: not valid YAML: binary data (!!binary) is not accepted here"),
], ids=["empty", "comment", "unclosed", "twice", "binary"])
def test_every_reader_names_the_file_and_the_place(tmp_path: Path, what: str, name: str, cmd: list[str],
                                                   text: str, expect: str) -> None:
    f = tmp_path / name
    f.write_text(text)
    before = snapshot(tmp_path)
    r = invoke(*[a.replace("{f}", str(f)).replace("{d}", str(tmp_path)) for a in cmd], cwd=tmp_path)
    refused(r, f"{f}{expect}")
    assert snapshot(tmp_path) == before, "a refused command wrote a file"


@pytest.mark.parametrize(("what", "name", "cmd"), [r for r in READERS if r[0] in ("hardware", "engine", "tree")])
def test_a_list_at_the_top_says_so(tmp_path: Path, what: str, name: str, cmd: list[str]) -> None:
    f = tmp_path / name
    f.write_text('"just a string"\n')
    refused(invoke(*[a.replace("{f}", str(f)) for a in cmd]), f"{f}: ", "got a string ('just a string')")


# --- a missing extra ------------------------------------------------------------------------------------------

def test_missing_extra_names_the_extra_and_the_command() -> None:
    assert str(missing_extra("tables", "aiconfigurator-core", "--cost-model table")) == \
        "--cost-model table needs the 'tables' extra: pip install -e \".[tables]\" (aiconfigurator-core)"
    with pytest.raises(SpecsimError, match=r"^specsim bench needs the 'bench' extra: pip install -e \"\.\[bench\]\" "
                                           r"\(torch\)$"):
        import_extra("specsim_no_such_module_xyz", "bench", "torch", "specsim bench")
    assert import_extra("json", "bench", "torch", "x") is json
    # the safety net in main(): an extra's ImportError no command caught is still bad input, not a bug
    err = extra_missing(ModuleNotFoundError("No module named 'torch'", name="torch"), "specsim bench")
    assert str(err) == "specsim bench needs the 'bench' extra: pip install -e \".[bench]\" (torch)"
    pandas_msg = ImportError("Unable to find a usable engine; tried using: 'pyarrow', 'fastparquet'.")
    assert "'tables' extra" in str(extra_missing(pandas_msg, "specsim sweep"))
    assert extra_missing(ModuleNotFoundError("No module named 'x'", name="x"), "y") is None
    assert extra_missing(KeyError("rows"), "y") is None


def test_unexpected_exception_is_one_internal_error_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import specsim.cli.catalog as catalog

    def boom(name: str) -> None:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(catalog.hwmod, "load_hardware", boom)
    r = invoke("hardware", "show", "h100-sxm")
    assert r.code == 3 and r.err.count("\n") == 1 and r.err.startswith("internal error: RuntimeError: boom second")


def test_bundled_catalogues_parse_under_the_strict_loader() -> None:
    """No bundled YAML gives a key twice (the loader now refuses it)."""
    for folder in (profiles_dir(), engines_dir(), ROOT / "scenarios"):
        for path in folder.glob("*.yaml"):
            assert isinstance(load_structured(path.read_text(), str(path)), dict), path

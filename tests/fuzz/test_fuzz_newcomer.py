"""Issue 30, property-based: misspelt catalogue names and malformed or empty YAML for every reader.

Whatever the spelling, a GPU or engine name either resolves to the one catalogue entry it spells (case and
separators aside) or is refused in one line naming the nearest names or the known ones; whatever the damage
to a valid YAML file, its reader either accepts it or refuses in one line naming the file and, for a parse
error, the line and column. Exit 2, no traceback, nothing left behind (an output path given included).

Examples per property: SPECSIM_FUZZ_EXAMPLES (default 40), as tests/fuzz/test_fuzz.py.
"""

from __future__ import annotations

import re

import yaml
from hypothesis import given
from hypothesis import strategies as st

from specsim.cost.hardware import available as hardware_names
from specsim.cost.hardware import profiles_dir
from specsim.engines.profile import available as engine_names
from specsim.engines.profile import engines_dir
from specsim.errors import SpecsimError
from specsim.names import normalised
from specsim.structured import load_structured
from tests.corpus.harness import ROOT, invoke, snapshot
from tests.fuzz.test_fuzz import SETTINGS, check, workdir

SCENARIO = ROOT / "scenarios" / "llama8b-1b-draft-h100.yaml"
_PLACE = re.compile(r" line \d+ column \d+: not valid (YAML|JSON)|: empty$|: nested too deeply")


@st.composite
def misspelt(draw: st.DrawFn, names: list[str]) -> str:
    """A catalogue name with one to three edits: case, a separator swapped, a character dropped, doubled
    or replaced, a suffix added."""
    name = list(draw(st.sampled_from(names)))
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, max(len(name) - 1, 0)))
        edit = draw(st.sampled_from(["upper", "sep", "drop", "double", "replace", "suffix"]))
        if edit == "upper":
            name = list("".join(name).upper())
        elif edit == "sep":
            name = [draw(st.sampled_from(["_", " ", "", "-"])) if c == "-" else c for c in name]
        elif edit == "drop" and len(name) > 1:
            del name[i]
        elif edit == "double" and name:
            name.insert(i, name[i])
        elif edit == "replace" and name:
            name[i] = draw(st.sampled_from(list("abcxz0189-_. ")))
        elif edit == "suffix":
            name += list(draw(st.sampled_from(["5", "-80gb", "x", "-nvl", ".0"])))
    return "".join(name).lstrip("-") or "x"  # a leading '-' is an option to click, not a name


def _refused_or_resolved(given_name: str, known: list[str], what: str, *args: str) -> None:
    with workdir() as d:
        before = snapshot(d)
        r = invoke(*args, cwd=d)
        check(r, before, snapshot(d), set(), " ".join(args))
        same = [n for n in known if normalised(n) == normalised(given_name)]
        if r.code == 0:  # resolved: only to the one name it spells
            assert given_name in known or len(same) == 1, f"{given_name!r} resolved, but spells {same}"
        else:
            assert len(same) != 1, f"{given_name!r} spells {same}: {r.err!r}"
            assert f"unknown {what} " in r.err and ("did you mean " in r.err or "(known: " in r.err), r.err


@SETTINGS
@given(misspelt(hardware_names()))
def test_fuzz_misspelt_gpu(name: str) -> None:
    _refused_or_resolved(name, hardware_names(), "hardware", "hardware", "show", name)


@SETTINGS
@given(misspelt(engine_names()))
def test_fuzz_misspelt_engine(name: str) -> None:
    _refused_or_resolved(name, engine_names(), "engine", "engines", "show", name)


@SETTINGS
@given(hw=st.one_of(misspelt(hardware_names()), st.just("h100-sxm")),
       engine=st.one_of(misspelt(engine_names()), st.just("vllm")))
def test_fuzz_misspelt_names_in_a_scenario_leave_no_output(hw: str, engine: str) -> None:
    """A scenario's hardware and engine spelt wrong: `sweep -o` refuses in one line and writes nothing."""
    data = yaml.safe_load(SCENARIO.read_text())
    data["hardware"], data["engine"] = hw, engine
    with workdir() as d:
        (d / "s.yaml").write_text(yaml.safe_dump(data))
        before = snapshot(d)
        r = invoke("sweep", str(d / "s.yaml"), "-o", str(d / "out.csv"), "--batch", "1,8", "--context", "1024", cwd=d)
        check(r, before, snapshot(d), {"out.csv"}, f"hardware {hw!r} engine {engine!r}")
        if r.code == 2:
            assert "unknown hardware" in r.err or "unknown engine" in r.err, r.err


damage = st.sampled_from(["[", "{", ":", ": :", "\t", "'", '"', "&a", "*nope", "- x", "\n  ", "}", "]", "#", "---\n",
                          "%", "@", "`", "? ", "!!binary x"])


@st.composite
def damaged(draw: st.DrawFn, text: str) -> str:
    """``text`` truncated, emptied, with a line repeated, or with characters YAML gives meaning to inserted."""
    how = draw(st.sampled_from(["insert", "insert", "insert", "truncate", "repeat", "empty", "comments"]))
    if how == "empty":
        return draw(st.sampled_from(["", "\n", "   \n\n", "---\n", "...\n"]))
    if how == "comments":
        return "".join(f"# {line}\n" for line in text.splitlines()[:5])
    if how == "truncate":
        return text[:draw(st.integers(0, len(text)))]
    if how == "repeat":
        lines = text.splitlines(keepends=True)
        i = draw(st.integers(0, len(lines) - 1))
        return "".join([*lines[:i + 1], lines[i], *lines[i + 1:]])
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(text)))
        text = text[:i] + draw(damage) + text[i:]
    return text


def _reader_refuses_in_place(text: str, name: str, *cmd: str, outputs: tuple[str, ...] = ()) -> None:
    """The property for one reader: exit 0 or one line; a text the parser refuses is named with its place."""
    try:
        load_structured(text, name)
        parses = True
    except SpecsimError:
        parses = False
    with workdir() as d:
        (d / name).write_text(text)
        args = [a.replace("{f}", str(d / name)).replace("{d}", str(d)) for a in cmd]
        before = snapshot(d)
        r = invoke(*args, cwd=d)
        check(r, before, snapshot(d), set(outputs), f"specsim {' '.join(cmd)} on {text[:300]!r}")
        if not parses:
            assert r.code == 2 and str(d / name) in r.err and _PLACE.search(r.err.strip()), r.err


@SETTINGS
@given(damaged((profiles_dir() / "h100-sxm.yaml").read_text()))
def test_fuzz_damaged_hardware_yaml(text: str) -> None:
    _reader_refuses_in_place(text, "hw.yaml", "hardware", "show", "{f}")


@SETTINGS
@given(damaged((engines_dir() / "sglang.yaml").read_text()))
def test_fuzz_damaged_engine_yaml(text: str) -> None:
    _reader_refuses_in_place(text, "e.yaml", "engines", "show", "{f}")


@SETTINGS
@given(damaged(SCENARIO.read_text()))
def test_fuzz_damaged_scenario_yaml_leaves_no_output(text: str) -> None:
    _reader_refuses_in_place(text, "s.yaml", "sweep", "{f}", "-o", "{d}/out.csv", "--batch", "1,8", "--context",
                             "1024", outputs=("out.csv",))


@SETTINGS
@given(damaged("parents: [-1, 0, 0, 1]\nacceptance: [[0.8, 0.3], [0.6, 0.2]]\n"))
def test_fuzz_damaged_tree_yaml(text: str) -> None:
    _reader_refuses_in_place(text, "t.yaml", "evaluate", "-c", "0.05", "--alpha", "0.7", "--tree", "{f}")


@SETTINGS
@given(damaged("alphas: [0.8, 0.7, 0.6]\n"))
def test_fuzz_damaged_acceptance_yaml(text: str) -> None:
    _reader_refuses_in_place(text, "a.yaml", "evaluate", "-c", "0.05", "--k", "3", "--acceptance", "{f}")

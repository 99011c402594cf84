"""YAML and JSON text parsed into plain data, with errors a person can act on (``files.py`` reads the
files; this module turns their text into data).

Every failure is one ``SpecsimError`` line that names the file (``where``) and, where the parser knows
it, the place: ``scenario.yaml line 3 column 9: did not find expected ',' or ']' (while parsing a flow
sequence from line 2 column 4)``. An empty file is named as empty; a file whose top level should be a
mapping and is not says what it is instead (``expected a mapping of fields, got a list``). A key given
twice in one YAML mapping is refused (the second would silently replace the first), as is nesting
deeper than ``MAX_DEPTH``. (JSON's repeated keys are not looked for: our JSON inputs are machine-written
config.json files, and a hook on every object would parse them 7x slower.)
"""

from __future__ import annotations

import json
from typing import Any

import yaml
from yaml.constructor import ConstructorError

from specsim.errors import SpecsimError

MAX_DEPTH = 64  # nesting levels accepted in a YAML/JSON input (none of ours needs more than 5)
_MERGE_TAG = "tag:yaml.org,2002:merge"

# libyaml's safe loader where PyYAML was built with it (the wheels are): the same documents, 5-10x faster
# (the hardware profiles of `hardware list` load in 0.05 s instead of 0.3 s)
_BASE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BASE_LOADER):
    """The safe loader, refusing a key given twice in one mapping (YAML says keys are unique; PyYAML
    keeps the last silently, so the first would be an input taken and ignored)."""

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            keys = [(k.tag, k.value, k) for k, _ in node.value
                    if isinstance(k, yaml.ScalarNode) and k.tag != _MERGE_TAG]
            if len({key[:2] for key in keys}) != len(keys):  # the common case, no repeat, costs one set
                seen: dict[tuple[str, str], yaml.Node] = {}
                for tag, value, key_node in keys:
                    if (tag, value) in seen:
                        first = seen[(tag, value)].start_mark.line + 1
                        raise ConstructorError(None, None, f"key {value!r} given twice (first at line {first})",
                                               key_node.start_mark)
                    seen[(tag, value)] = key_node
        return super().construct_mapping(node, deep)


def _refuse_binary(loader: Any, node: yaml.Node) -> Any:
    """``!!binary`` data: no input of ours is bytes, and a bytes key or value is an input nothing reads."""
    raise ConstructorError(None, None, "binary data (!!binary) is not accepted here", node.start_mark)


_Loader.add_constructor("tag:yaml.org,2002:binary", _refuse_binary)


def _at(mark: Any) -> str:
    return f"line {mark.line + 1} column {mark.column + 1}"


def yaml_error(exc: yaml.YAMLError, where: str, text: str) -> SpecsimError:
    """``WHERE line L column C: not valid YAML: PROBLEM (CONTEXT from line L column C)`` for a YAML
    parse error (lines and columns counted from 1, as editors do)."""
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if problem is None or mark is None:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return SpecsimError(f"{where}: not valid YAML: {first}")
    if "maximum nesting depth" in problem:
        return SpecsimError(f"{where}: nested too deeply (at most {MAX_DEPTH} levels)")
    lines = text.splitlines()
    if "tab" not in problem and mark.line < len(lines) and lines[mark.line][mark.column:mark.column + 1] == "\t":
        problem += " (a tab: YAML indents with spaces)"
    context, context_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if context and context_mark is not None and _at(context_mark) != _at(mark):
        problem += f" ({context} from {_at(context_mark)})"
    return SpecsimError(f"{where} {_at(mark)}: not valid YAML: {' '.join(problem.split())}")


def is_blank(text: str, fmt: str = "yaml") -> bool:
    """True when ``text`` holds no data: whitespace only, or (YAML) only comments and document markers."""
    stripped = text.lstrip()
    if fmt == "json" or not stripped or stripped[0] not in "#-.":  # the common case: data on the first line
        return not stripped
    return all(not line.strip() or line.lstrip().startswith("#") or line.strip() in ("---", "...")
               for line in text.splitlines())


def load_structured(text: str, where: str, fmt: str = "yaml") -> Any:
    """Parse YAML (``fmt`` "yaml") or JSON ("json"); SpecsimError naming ``where`` (and the line and
    column) when it cannot be parsed, is empty, or nests deeper than MAX_DEPTH."""
    if is_blank(text, fmt):
        raise SpecsimError(f"{where}: empty")
    try:
        data = (json.loads(text) if fmt == "json"
                else yaml.load(text, Loader=_Loader))  # a safe loader
    except RecursionError:
        raise SpecsimError(f"{where}: nested too deeply (at most {MAX_DEPTH} levels)") from None
    except json.JSONDecodeError as exc:
        raise SpecsimError(f"{where} line {exc.lineno} column {exc.colno}: not valid JSON: {exc.msg}") from None
    except yaml.YAMLError as exc:
        raise yaml_error(exc, where, text) from None
    except ValueError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SpecsimError(f"{where}: not valid {'JSON' if fmt == 'json' else 'YAML'}: {first}") from None
    if not _depth_ok(data, MAX_DEPTH):
        raise SpecsimError(f"{where}: nested too deeply (at most {MAX_DEPTH} levels)")
    return data


def kind_of(value: object) -> str:
    """What a parsed value is, in words: "a list", "a string ('abc')", "a number (3)", "nothing (null)"."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"{str(value).lower()} (a yes/no value)"
    if isinstance(value, int | float):
        return f"a number ({value!r})"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({' '.join(shown.split())!r})"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def expect_mapping(data: object, where: str) -> dict[str, Any]:
    """``data`` when it is a mapping; else SpecsimError "WHERE: expected a mapping of fields, got a list"."""
    if not isinstance(data, dict):
        raise SpecsimError(f"{where}: expected a mapping of fields (key: value lines), got {kind_of(data)}")
    return data


def _depth_ok(data: Any, limit: int) -> bool:
    """True when ``data`` nests at most ``limit`` containers deep (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    seen: set[int] = set()
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list | tuple):
            if depth > limit:
                return False
            if id(value) in seen:  # YAML anchors share objects (and may even form cycles)
                continue
            seen.add(id(value))
            children = list(value.keys()) + list(value.values()) if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)
    return True

"""The CLI's one vocabulary: every option that is a field of a question is built here from its one definition
(`specsim.fields.FIELDS`: name, help, type, bounds, which commands take it), so that a flag is spelt, typed,
bounded and documented the same in every command, as its grid column and scenario key are.

`fields_command(door)` gives a command every field of that door as an option (grouped under its panel in
--help) and calls the command with a `Given`: the values, parsed and checked by the field, and which of them
the user typed. Options that are not fields (--format, --grid, --plot, ...) stay in the command's signature.

Rule for lists: option names are singular; an option that is an axis of the output (``--tokens`` in
ops/forward; ``--batch``, ``--context``, ``--alpha-grid`` in sweep; ``--concurrency`` in simulate) takes a
list (1,2,4 | 1-16 | 1:16:4 | 1:4096:x2), anywhere else one value.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from specsim.errors import SpecsimError
from specsim.fields import FIELDS, METAVARS, Field, Given, fields_of

if TYPE_CHECKING:
    from specsim.scenario.scenario import Scenario

FORMAT_HELP = "table | csv | json | markdown"


def option(name: str, help: str | None = None, panel: bool = False) -> Any:
    """The typer option of field `name`: its flags, help, metavar and default as FIELDS states them (`help`
    replaces the help where a command reads the field differently, e.g. plan's overrides)."""
    from rich.markup import escape  # typer renders help as rich markup: "[default: 1]" would vanish as a tag

    f = FIELDS[name]
    text = help or f.help
    default = "" if f.default in (None, False) or f.kind == "bool" else f" [default: {f.default}]"
    return typer.Option(f.flag, *((f.short,) if f.short else ()), help=escape(text + default),
                        metavar=f.metavar or METAVARS[f.kind] or None, show_default=False,
                        rich_help_panel=f.group if panel else None)


def _annotation(f: Field, panel: bool) -> Any:
    """A field's option as a parameter annotation: the raw text (parsed by the field itself, so that a flag,
    a grid cell and a YAML value are read by one parser), or a flag for a yes/no field."""
    if f.kind == "bool":
        return Annotated[bool, option(f.name, panel=panel)]
    return Annotated[str | None, option(f.name, panel=panel)]


def _fields(door: str, only: tuple[str, ...] | None = None) -> list[Field]:
    """The door's fields (`only` these of them, where a command takes a part of its door's question)."""
    return [f for f in fields_of(door) if only is None or f.name in only]


def field_params(door: str, only: tuple[str, ...] | None = None) -> list[inspect.Parameter]:
    """One keyword parameter per field of `door`, in FIELDS' order, and a hidden one per old spelling."""
    out = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=False if f.kind == "bool" else None,
                             annotation=_annotation(f, panel=True)) for f in _fields(door, only)]
    old = [inspect.Parameter(f"{f.name}__{o}", inspect.Parameter.KEYWORD_ONLY, default=None,
                             annotation=Annotated[str | None, typer.Option("--" + o.replace("_", "-"), hidden=True)])
           for f in _fields(door, only) for o in f.old]
    return out + old


def _old_spelling(f: Field, raw: dict[str, Any]) -> Any:
    """The field's raw value, from its name or one old spelling (both: one line)."""
    value = raw.pop(f.name)
    for o in f.old:
        was = raw.pop(f"{f.name}__{o}")
        if was is not None:
            flag = "--" + o.replace("_", "-")
            if value is not None:
                raise SpecsimError(f"give {f.flag} or {flag}, not both (the same option: {flag} is its old name)")
            value = was
    return value


def given_of(door: str, raw: dict[str, Any], only: tuple[str, ...] | None = None) -> Given:
    """The door's field values from a command line's raw option values: each typed one parsed by its field
    (SpecsimError naming the flag), the rest at their defaults."""
    values: dict[str, Any] = {}
    typed: set[str] = set()
    for f in _fields(door, only):
        value = _old_spelling(f, raw)
        if f.kind == "bool":
            values[f.name] = bool(value)
            if value:
                typed.add(f.name)
        elif value is not None:
            values[f.name] = f.parse(value)
            typed.add(f.name)
        else:
            values[f.name] = f.default
    given = Given(values, frozenset(typed))
    if door != "evaluate":  # simulate's own body: a deployment's question only where no scenario file is given
        return given
    from specsim.scenario.deployment import fill

    return fill(given, door)


def fields_command(door: str, only: tuple[str, ...] | None = None
                   ) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Make `body(given, **own)` a command taking every field of `door` (`only` these) as an option beside its own
    options; register the result with `app.command()`."""
    def wrap(body: Callable[..., None]) -> Callable[..., None]:
        hints = typing.get_type_hints(body, include_extras=True)
        own = [p.replace(annotation=hints.get(p.name, p.annotation))
               for p in inspect.signature(body).parameters.values() if p.name != "given"]
        params = [*own, *field_params(door, only)]

        @functools.wraps(body)
        def command(**raw: Any) -> None:
            given = given_of(door, raw, only)
            body(given, **raw)

        command.__doc__ = paragraphs(body.__doc__ or "")
        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        del command.__wrapped__  # typer must read the signature above, not the body's
        return command

    return wrap


def paragraphs(doc: str) -> str:
    """A docstring as --help shows it: each paragraph's lines joined (typer keeps a docstring's line breaks)."""
    return "\n\n".join(" ".join(p.split()) for p in inspect.cleandoc(doc).split("\n\n"))


# The options of commands that are not (yet) built by fields_command: the same fields, spelt and helped the same.
Fmt = Annotated[str, typer.Option("--format", "-f", help=FORMAT_HELP)]
Hardware = Annotated[str, option("hardware")]
Model = Annotated[str, option("model")]
Tp = Annotated[int, option("tp")]
WeightDtype = Annotated[str | None, option("weight_dtype")]
DtypeAlias = Annotated[str | None, typer.Option("--dtype", hidden=True, help="old name of --weight-dtype")]
KvDtype = Annotated[str, option("kv_dtype")]
Batch = Annotated[str, option("batch")]  # parsed by the field (2k, 128K: fields.parse_tokens)
Context = Annotated[str, option("context")]
Tokens = Annotated[str, typer.Option("--tokens", help="new tokens per sequence (a list): 1,2,4 or 1-16 or 1:4096:x2")]
Engine = Annotated[str | None, option("engine", help="serving engine: vllm | sglang | trtllm | atom | hf | a version "
                                      "(specsim engines list) | a profile YAML; default: the scenario's")]
CostModel = Annotated[str | None, option("cost_model")]
DeploymentFile = Annotated[Path | None, option("deployment")]


def weight_dtype(value: str | None, alias: str | None = None) -> str:
    """--weight-dtype (or its hidden old name --dtype) checked: a weight format, `native` (the checkpoint's own,
    the default) or a format per part (`fp8,experts=nvfp4`); SpecsimError naming the accepted ones."""
    from specsim.cost.dtypes import WEIGHT_BYTES, check_precision

    if value is not None and alias is not None and value != alias:
        raise SpecsimError(f"give --weight-dtype only (--dtype is its old name), got {value!r} and {alias!r}")
    given = value if value is not None else alias
    if given is None:
        return str(FIELDS["weight_dtype"].default)
    option = "--weight-dtype" if value is not None else "--dtype"
    try:
        return check_precision(str(given))
    except SpecsimError:
        raise SpecsimError(f"{option} must be one of {' | '.join(WEIGHT_BYTES)} | native, or a format per part "
                           f"(fp8,experts=nvfp4), got {given!r}") from None


def batch_context(batch: str | int, context: str | int) -> tuple[int, int]:
    """--batch and --context read by their fields (2k, 128K), within their bounds."""
    return int(FIELDS["batch"].parse(batch)), int(FIELDS["context"].parse(context))


def scenario_of(path: Path | None, cost_model: str | None = None, engine: str | None = None,
                deployment: Path | None = None) -> Scenario:
    """The scenario a plan, sweep or report answers: the file's (`overridden`), or without one the question a
    fitted --deployment's runs asked (advise/fit_runs.deployment_scenario)."""
    from specsim.scenario.scenario import load_scenario

    if path is not None:
        return overridden(load_scenario(path), cost_model, engine, deployment)
    if deployment is None:
        raise SpecsimError("give a scenario YAML, or --deployment FILE (the question its runs asked)")
    from specsim.advise.fit_runs import deployment_scenario

    return overridden(deployment_scenario(deployment), cost_model, engine, deployment)


def overridden(s: Scenario, cost_model: str | None = None, engine: str | None = None,
               deployment: Path | None = None) -> Scenario:
    """The scenario priced with --cost-model and run by --engine (the scenario's own where None), on a fitted
    --deployment (its `deployment:` field: the scenario read again with it, scenario/deployment.py)."""
    if deployment is not None:
        from specsim.scenario.scenario import parse_scenario

        if cost_model is not None:
            from specsim.scenario.deployment import OTHER_COST_MODEL

            raise SpecsimError(f"--cost-model {OTHER_COST_MODEL}")
        raw = {**s.raw, "deployment": str(deployment.resolve()), **({"engine": engine} if engine else {})}
        s, engine = parse_scenario(raw, s.path), None
    if cost_model is not None:
        s = dataclasses.replace(s, hardware=s.hardware.with_cost_model(cost_model))
    if engine is not None:
        from specsim.engines.profile import load_engine

        s = dataclasses.replace(s, engine=load_engine(engine))
    return s

"""Entry point: builds the typer app from the command modules and maps outcomes to exit statuses.

0 ok; 1 a check failed (``validate``); 2 bad input (a ``SpecsimError``, a usage error, with the nearest
option where one was misspelt, or an optional extra's module missing), one line on stderr; 3 an internal
error, one line asking for a report (the traceback only with SPECSIM_DEBUG=1); 130 interrupted.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Annotated, Any

import typer
from typer.main import get_command

from specsim import __version__
from specsim.errors import EXIT_BAD_INPUT, EXIT_INTERNAL, ISSUE_TRACKER, SpecsimError, missing_extra
from specsim.names import did_you_mean

app = typer.Typer(
    name="specsim",
    help="Should you speculate, and how? Analytic speculative-decoding planner.\n\n"
         "Exit status: 0 ok, 1 a check failed (validate), 2 bad input, 3 internal error.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        print(f"specsim {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """The root of every command: only --version lives here."""


#: Which module defines each command: a command imports only its own module (and what that needs),
#: so `specsim --version` or `specsim hardware list` does not pay for pandas and the planner.
COMMAND_MODULES = {
    "plan": "plan", "sweep": "plan", "report": "report", "simulate": "simulate",
    "evaluate": "spec", "validate": "spec", "beta": "spec",
    "hardware": "catalog", "models": "catalog", "ops": "costs", "forward": "costs", "predict": "costs",
    "engines": "engines",
    "fleet": "fleet", "pools": "pools",
    "fit-runs": "deploy", "bench": "calib", "import": "calib", "calibrate": "calib", "calibrate-tables": "calib",
}


def _command_of(argv: list[str]) -> str | None:
    """The command a command line names (its first word that is not an option), or None."""
    return next((a for a in argv if not a.startswith("-")), None)


def _register(argv: list[str] | None = None) -> None:
    """Import the module of the command in `argv` (each module adds its commands to `app`); all of them
    when no known command is named (help, a typo: click then lists or suggests every command)."""
    import importlib

    args = sys.argv[1:] if argv is None else argv
    command = _command_of(args)
    if command is None and "--version" in args:
        return
    name = COMMAND_MODULES.get(command or "")
    for module in sorted(set(COMMAND_MODULES.values())) if name is None else [name]:
        importlib.import_module(f"specsim.cli.{module}")


def _registered(t: typer.Typer) -> tuple[int, ...]:
    """The commands and groups `t` holds (theirs too), by identity."""
    return (*(id(c) for c in t.registered_commands), *(
        x for g in t.registered_groups for x in (id(g), *(_registered(g.typer_instance) if g.typer_instance else ()))))


_CLICK: dict[tuple[int, ...], Any] = {}


def _click_command() -> Any:
    """The click command of `app`. typer builds it from the commands' signatures, evaluating their annotations
    anew each time (30 ms with every command module imported): a process that runs main() many times (the tests, a
    notebook) builds it once, cached on the commands registered (`_registered`: a command module imported later
    builds it again)."""
    key = _registered(app)
    if key not in _CLICK:
        _CLICK.clear()
        _CLICK[key] = get_command(app)
    return _CLICK[key]


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def internal_error(exc: BaseException) -> None:
    """Report an unexpected exception as one line (the traceback too with SPECSIM_DEBUG=1); exit 3."""
    if os.environ.get("SPECSIM_DEBUG") == "1":
        traceback.print_exception(exc)
    msg = _one_line(str(exc))[:500]
    print(f"internal error: {type(exc).__name__}: {msg} — please report this at {ISSUE_TRACKER} with the "
          "command you ran (SPECSIM_DEBUG=1 shows the traceback)", file=sys.stderr)
    sys.exit(EXIT_INTERNAL)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; exit statuses as in the module docstring."""
    _register(argv)
    try:
        # With standalone_mode=False click returns (rather than raises) a command's exit code.
        code = _click_command()(args=argv, prog_name="specsim", standalone_mode=False)
    except SpecsimError as exc:
        print(f"error: {_one_line(str(exc))}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        # stdout closed early (`specsim ... | head`): not an error of ours; silence the flush at exit
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), sys.stdout.fileno())
        sys.exit(0)
    except SystemExit:
        raise
    except Exception as exc:
        # click usage errors (typer vendors click, so match on its exception API, not its class)
        if hasattr(exc, "show") and hasattr(exc, "exit_code"):
            _show_usage_error(exc)
            sys.exit(EXIT_BAD_INPUT)
        command = _command_of(sys.argv[1:] if argv is None else argv)
        if (missing := extra_missing(exc, f"specsim {command}")) is not None:
            print(f"error: {missing}", file=sys.stderr)
            sys.exit(EXIT_BAD_INPUT)
        internal_error(exc)
    sys.exit(code if isinstance(code, int) else 0)


def _show_usage_error(exc: Exception) -> None:
    """A click usage error as one line: 'error: <message> (try: specsim CMD --help)'; a misspelt option
    names the command's nearest options ('No such option: --hardwre (did you mean --hardware?)')."""
    ctx = getattr(exc, "ctx", None)
    msg = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    option = getattr(exc, "option_name", None)
    if option is not None and hasattr(exc, "possibilities"):
        msg = f"{getattr(exc, 'message', msg)}{did_you_mean(option, _long_options(ctx)) or _click_guess(exc)}"
    hint = f" (try: {ctx.command_path} --help)" if ctx is not None else ""
    print(f"error: {_one_line(msg)}{hint}", file=sys.stderr)


def _long_options(ctx: object) -> list[str]:
    """The --long names of the options of the command ``ctx`` (a click Context) runs."""
    params = getattr(getattr(ctx, "command", None), "params", None) or []
    return [o for p in params for o in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ()))
            if o.startswith("--")]


def _click_guess(exc: Exception) -> str:
    """click's own close matches, as " (did you mean ...?)" (when the command's options are not known)."""
    guesses = sorted(getattr(exc, "possibilities", None) or [])
    return f" (did you mean {', '.join(guesses)}?)" if guesses else ""


#: Top-level modules of the optional extras (pyproject.toml): module -> (extra, package)
EXTRA_MODULES = {"torch": ("bench", "torch"), "aiconfigurator_core": ("tables", "aiconfigurator-core"),
                 "pyarrow": ("tables", "pyarrow")}


def extra_missing(exc: BaseException, for_what: str) -> SpecsimError | None:
    """The missing-extra error for an ImportError of an optional extra's module that a command did not
    catch itself (pandas' "Unable to find a usable engine; tried using: 'pyarrow'" included); else None."""
    if not isinstance(exc, ImportError):
        return None
    name = (exc.name or "").split(".")[0]
    found = EXTRA_MODULES.get(name) or next((v for k, v in EXTRA_MODULES.items() if f"'{k}'" in str(exc)), None)
    return None if found is None else missing_extra(found[0], found[1], for_what)

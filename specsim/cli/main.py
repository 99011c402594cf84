"""Entry point: builds the typer app from the command modules and maps bad input to exit 2."""

from __future__ import annotations

import sys

import typer

from specsim.errors import SpecsimError

app = typer.Typer(
    name="specsim",
    help="Should you speculate, and how? Analytic speculative-decoding planner.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register() -> None:
    # Each command module adds its commands to `app`; imported here so that `main` stays thin.
    from specsim.cli import (  # noqa: F401
        calib,
        costs,
        plan,
        report,
        spec,
    )


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; any SpecsimError becomes one line on stderr and exit status 2."""
    _register()
    try:
        # With standalone_mode=False click returns (rather than raises) a command's exit code.
        code = app(args=argv, standalone_mode=False)
    except SpecsimError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        print("aborted", file=sys.stderr)
        sys.exit(130)
    except Exception as exc:
        # click usage errors (typer vendors click, so match on its exception API, not its class)
        if hasattr(exc, "show") and hasattr(exc, "exit_code"):
            exc.show()
            sys.exit(exc.exit_code)
        raise
    sys.exit(code if isinstance(code, int) else 0)

"""The exception types the CLI maps to exit statuses, and those statuses.

Exit statuses (README, "One CLI vocabulary"): 0 ok, 1 a check failed (``validate``), 2 bad input
(any ``SpecsimError``), 3 an internal error (anything else: a bug, reported as one line).

``missing_extra`` / ``import_extra``: the one wording for an optional extra that is not installed.
Names a user typed that no catalogue knows: ``specsim.names.unknown`` (did you mean ...).
"""

from __future__ import annotations

from typing import Any

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3

#: Where internal errors should be reported (printed with every internal error).
ISSUE_TRACKER = "the specsim issue tracker"  # the lead sets the URL once the project has a public one


class SpecsimError(ValueError):
    """Bad input: a malformed file, an unknown name, a value out of range.

    The message is one line, names what is wrong (file, field, allowed values) and is shown to
    the user as is.
    """


def missing_extra(extra: str, package: str, for_what: str) -> SpecsimError:
    """The error for an optional extra that is not installed, as one line naming the extra and the
    command that installs it (run in the specsim checkout, as the README installs specsim):

    >>> str(missing_extra("tables", "aiconfigurator-core", "--cost-model table"))
    '--cost-model table needs the \\'tables\\' extra: pip install -e ".[tables]" (aiconfigurator-core)'
    """
    return SpecsimError(f"{for_what} needs the '{extra}' extra: pip install -e \".[{extra}]\" ({package})")


def import_extra(module: str, extra: str, package: str, for_what: str) -> Any:
    """``importlib.import_module(module)``, or ``missing_extra(...)`` raised when it is not installed
    (a module of an extra, e.g. ``import_extra("pyarrow.parquet", "tables", "pyarrow", "writing Parquet")``)."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise missing_extra(extra, package, for_what) from None

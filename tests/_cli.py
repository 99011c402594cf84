"""Running the CLI in-process from tests: exit status, stdout and stderr."""

from __future__ import annotations

import pytest

from specsim.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`specsim ARGS...` through main(); returns (exit status, stdout, stderr)."""
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err

"""Running the CLI in-process for the corpus and fuzz tests: exit status, stdout, stderr and the
warnings raised, with stdout/stderr redirected (usable inside hypothesis tests, unlike capsys), and a
snapshot of a folder to prove that a command left nothing behind."""

from __future__ import annotations

import contextlib
import io
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

from specsim.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Result:
    code: int
    out: str
    err: str
    warnings: list[str]


def invoke(*args: str, cwd: Path | None = None) -> Result:
    """`specsim ARGS...` through main() (in `cwd` if given)."""
    out, err = io.StringIO(), io.StringIO()
    old = Path.cwd()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        warnings.simplefilter("always")
        if cwd is not None:
            os.chdir(cwd)
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            os.chdir(old)
    return Result(code, out.getvalue(), err.getvalue(), [str(w.message) for w in caught])


def snapshot(root: Path) -> dict[str, tuple[str, int, int]]:
    """Every entry under root (symlinks not followed): relative path -> (kind, size, mtime_ns)."""
    out: dict[str, tuple[str, int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            kind = "link" if p.is_symlink() else "dir" if p.is_dir() else "file"
            out[str(p.relative_to(root))] = (kind, st.st_size if kind == "file" else 0,
                                             st.st_mtime_ns if kind == "file" else 0)
    return out


def assert_clean_failure(r: Result, expect: tuple[str, ...], before: dict, after: dict, what: str) -> None:
    """Exit 2, exactly one line on stderr containing every `expect` substring, no traceback, no
    warnings, nothing written."""
    assert r.code == 2, f"{what}: exit {r.code}, stderr {r.err!r}"
    assert r.err.endswith("\n") and r.err.count("\n") == 1, f"{what}: stderr is not one line: {r.err!r}"
    assert "Traceback" not in r.err and "internal error" not in r.err, f"{what}: {r.err!r}"
    for s in expect:
        assert s in r.err, f"{what}: {s!r} not in {r.err!r}"
    assert not r.warnings, f"{what}: warnings {r.warnings}"
    assert after == before, f"{what}: files changed: {sorted(set(after) ^ set(before))}"


def leftovers(before: dict, after: dict, allowed: set[str]) -> list[str]:
    """New entries that are not among `allowed` (relative paths), e.g. a stray .tmp file."""
    return sorted(p for p in set(after) - set(before) if p not in allowed and not any(
        p.startswith(a + os.sep) for a in allowed))

"""Issue #13: every bad input in the corpus (tests/corpus/cases.py, >= 200 cases) gets exit status 2,
one line on stderr naming the input and what is wrong, no traceback, no warning, and nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.corpus.cases import DIR, ROOT, Case, all_cases
from tests.corpus.harness import assert_clean_failure, invoke, snapshot

CASES = all_cases()


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 200
    assert len({c.id for c in CASES}) == len(CASES), "case ids must be unique"


def prepare(case: Case, tmp: Path) -> tuple[Path, Path, list[str]]:
    """The case's folder (its files written), a working folder (scenarios/ and examples/ linked in)
    and the arguments with {d} filled in."""
    d = tmp / "case"
    d.mkdir()
    for name, content in sorted(case.files.items()):
        p = d / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if content is DIR:
            p.mkdir(exist_ok=True)
        elif isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)
    if case.setup is not None:
        case.setup(d)
    cwd = tmp / "cwd"
    cwd.mkdir()
    for name in ("scenarios", "examples"):
        (cwd / name).symlink_to(ROOT / name)
    return d, cwd, [a.replace("{d}", str(d)) for a in case.args]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, tmp_path: Path) -> None:
    _, cwd, args = prepare(case, tmp_path)
    before = snapshot(tmp_path)
    r = invoke(*args, cwd=cwd)
    after = snapshot(tmp_path)
    assert_clean_failure(r, case.expect, before, after, f"{case.id}: specsim {' '.join(args)}")

"""Every `specsim ...` command in the README's ```bash blocks runs as written from the repository root
(exit 0), except lines marked `[GPU]` (they need a GPU or its output) or `[slow]` (minutes); lines marked
`[tables]` run when the `.[tables]` extra (aiconfigurator-core, pyarrow) is installed. They run
in a scratch copy of the layout (scenarios/, examples/, and ../shared/ when present), so the outputs
they write land there."""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path

import pytest

from tests.corpus.harness import ROOT, invoke

README = ROOT / "README.md"
SKIP = ("[GPU]", "[slow]")
HAVE_TABLES = all(importlib.util.find_spec(m) is not None for m in ("aiconfigurator_core", "pyarrow"))


def readme_commands() -> list[tuple[str, list[str] | None]]:
    """(command line as written, argv after `specsim` or None when marked to skip), in README order."""
    text = README.read_text()
    out: list[tuple[str, list[str] | None]] = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        logical = re.sub(r"\\\n\s*", " ", block).splitlines()
        for line in logical:
            for part in line.split("&&"):
                part = part.strip()
                if not part.startswith("specsim "):
                    continue
                words = shlex.split(part, comments=True)
                out.append((part, None if any(m in part for m in SKIP) else words[1:]))
    return out


COMMANDS = readme_commands()


def test_readme_has_the_examples_the_issue_names() -> None:
    lines = [c for c, _ in COMMANDS]
    assert any("examples/measurements.csv" in c for c in lines)
    assert any("examples/vllm_metrics.txt" in c for c in lines)
    assert all("--alphas 0" not in c for c in lines if c.startswith("specsim sweep"))
    assert sum(argv is not None for _, argv in COMMANDS) >= 15


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """work/ (scenarios and examples linked in, as in a checkout) beside shared/ (linked, if present)."""
    top = tmp_path_factory.mktemp("readme")
    work = top / "work"
    work.mkdir()
    for name in ("scenarios", "examples"):
        (work / name).symlink_to(ROOT / name)
    shared = ROOT.parent / "shared"
    if shared.is_dir():
        (top / "shared").symlink_to(shared)
    return work


@pytest.mark.parametrize("line,argv", COMMANDS, ids=[f"{i}:{c[:60]}" for i, (c, _) in enumerate(COMMANDS)])
def test_readme_command_runs_as_written(line: str, argv: list[str] | None, scratch: Path) -> None:
    if argv is None:
        pytest.skip("marked [GPU] or [slow] in the README")
    if "[tables]" in line and not HAVE_TABLES:
        pytest.skip("marked [tables]: aiconfigurator-core / pyarrow not installed")
    if "../shared/" in line and not (scratch.parent / "shared").is_dir():
        pytest.skip("../shared/reference is absent")
    r = invoke(*argv, cwd=scratch)
    assert r.code == 0, f"{line}\n{r.err}"

"""The house floors on the serving simulation's modules (issue 30): no module over 450 lines, no function body over
70 (a typer command's signature aside: the body is counted from its first statement, docstring included)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "specsim"
MODULES = sorted([*(ROOT / "simulate").glob("*.py"),
                  *(ROOT / p for p in ("advise/simulation.py", "advise/benchmark.py", "advise/traffic.py",
                                       "cli/simulate.py", "cli/simulate_output.py", "cli/simulate_sweeps.py",
                                       "scenario/traffic.py", "scenario/lengths.py", "scenario/traces.py",
                                       "scenario/workload.py", "scenario/serving.py"))])


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(ROOT)) for p in MODULES])
def test_module_and_function_floors(path: Path) -> None:
    source = path.read_text()
    assert len(source.splitlines()) <= 450, f"{path.name}: {len(source.splitlines())} lines"
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = (node.end_lineno or 0) - node.body[0].lineno + 1
            assert body <= 70, f"{path.name}: {node.name} has a {body}-line body"

"""The README tells the truth (issue 30): every figure it marks (tools/readme_figures.py) is what the tool gives.

The fast figures (the listings' counts, the corpora, the examples, the configuration vocabulary of
specsim/fields.py, `specsim validate --published`) are computed again here and compared. The slow ones (the serving
validation, the kernel and module tables, the priors' hold-out, the Speed table, the test run's time) are compared
with the records the generator wrote in benchmarks/results.json: this proves that the README shows what the tool
and the benchmarks wrote, not that this machine is as fast. A stale figure fails naming it; the fix is
`python tools/readme_figures.py --only fast` (or, for a record, `--only NAME`)."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from tools import readme_figures as rf
from tools.readme_common import README, Figures

TODAY = datetime.date.today().isoformat()


@pytest.fixture(scope="module")
def text() -> str:
    return README.read_text()


@pytest.fixture(scope="module")
def records() -> dict:
    return rf.load_records()


@pytest.fixture(scope="module")
def fast(records: dict) -> Figures:
    """Every figure: cat and pub run now, the rest from the records (as `--check --only fast` computes them)."""
    figures, _ = rf.gather(["cat", "pub"], check=True, records=records)
    return figures


def _stale(text: str, figures: Figures, prefixes: tuple[str, ...]) -> list[str]:
    out = rf.render(text, figures, set(rf.SOURCES), TODAY)
    return [f"{p.name}: the README says {p.old.strip()[:200]!r}, the tool {new.strip()[:200]!r}"
            for p, new in out.stale if p.name.startswith(prefixes) and p.name not in rf.STICKY]


def test_markers_are_well_formed(text: str) -> None:
    found, problems = rf.places(text)
    assert not problems, problems
    names = {p.name for p in found}
    assert {n.split(".")[0] for n in names} <= set(rf.SOURCES)
    # the figures are all marked: counts, the accuracy and serving tables, crossovers, timings, vocabulary
    assert {"cat.gpus", "cat.models", "cat.engines", "cat.corpus_cases", "cat.fields", "pub.table",
            "pub.xover.sglang.predicted", "serving.table", "kernels.table", "speed.table", "tests.wall"} <= names


def test_counts_and_vocabulary_are_current(text: str, fast: Figures) -> None:
    stale = _stale(text, fast, ("cat.",))
    assert not stale, "stale README figures (python tools/readme_figures.py --only fast):\n" + "\n".join(stale)


def test_published_figures_are_current(text: str, fast: Figures) -> None:
    stale = _stale(text, fast, ("pub.",))
    assert not stale, "stale README figures (python tools/readme_figures.py --only fast):\n" + "\n".join(stale)


def test_the_readmes_claims_still_hold(fast: Figures) -> None:
    """A sentence around a figure (too optimistic, never stops paying) that the tool now contradicts."""
    claims = [p for p in fast.problems if not p.startswith("no record")]
    assert not claims, claims


def test_recorded_figures_show_their_records(text: str, records: dict) -> None:
    missing = [name for name in rf.RECORDED if name not in records]
    assert not missing, f"no record for {missing} in benchmarks/results.json"
    for name, rec in records.items():
        assert name in rf.RECORDED, f"a record no source writes: {name}"
        datetime.date.fromisoformat(rec["date"])
        assert rec["cores"] and rec["cpu"] and rec["data"], name
    f = Figures()
    rf.record_figures(records, f)
    stale = _stale(text, f, tuple(f"{n}." for n in rf.RECORDED))
    assert not stale, "the README differs from benchmarks/results.json (python tools/readme_figures.py --only " \
                      "fast writes it from the records):\n" + "\n".join(stale)


def test_the_vocabulary_table_has_every_field(text: str) -> None:
    from specsim.fields import FIELDS

    body = text.split("<!-- gen:cat.fields -->", 1)[1].split("<!-- /gen:cat.fields -->", 1)[0]
    rows = [line for line in body.splitlines() if line.startswith("| `")]
    assert [r.split("`")[1] for r in rows] == list(FIELDS)


def test_a_stale_figure_fails_naming_it(tmp_path: Path, records: dict, capsys: pytest.CaptureFixture[str]) -> None:
    """`--check` against a README whose Speed table and a held-out figure were edited by hand: exit 1, both named."""
    text = README.read_text()
    f = Figures()
    rf.record_figures(records, f)
    edited = text.replace("| start-up, listings |", "| start-up, listings (by hand) |")
    mark = f"<!-- n:priors.stated_n -->{f['priors.stated_n']}<!-- /n -->"
    edited = edited.replace(mark, "<!-- n:priors.stated_n -->53<!-- /n -->")
    assert edited != text
    readme = tmp_path / "README.md"
    readme.write_text(edited)
    assert rf.main(["--check", "--only", "", "--readme", str(readme)]) == 1
    out = capsys.readouterr().out
    assert "stale speed.table" in out and "stale priors.stated_n" in out
    assert readme.read_text() == edited  # --check writes nothing


def test_render_puts_each_kind_of_figure_in_place() -> None:
    text = ("Counted <!-- n:cat.models -->66<!-- /n --> models (as of <!-- n:pub.date -->2020-01-01<!-- /n -->).\n"
            "- a list item:\n\n  <!-- gen:pub.table -->\n  | a |\n  <!-- /gen:pub.table -->\n"
            "```bash\nspecsim hardware list   # 3 GPU profiles\n```\n")
    figures = {"cat.models": "67", "pub.table": "| a |\n|---|", "cat.gpus": "25"}
    out = rf.render(text, figures, {"cat", "pub"}, "2026-01-02")
    assert "Counted <!-- n:cat.models -->67<!-- /n --> models" in out.text
    assert "  <!-- gen:pub.table -->\n  | a |\n  |---|\n  <!-- /gen:pub.table -->" in out.text  # indented
    assert "<!-- n:pub.date -->2026-01-02<!-- /n -->" in out.text  # a pub figure changed: the date moves
    assert "# 25 GPU profiles" in out.text
    assert {p.name for p, _ in out.stale} == {"cat.models", "pub.table", "pub.date", "cat.gpus"}
    again = rf.render(out.text, figures, {"cat", "pub"}, "2027-01-01")
    assert not again.stale and again.text == out.text  # nothing changed: the date stays
    assert any("inline marker starts a line" in p for p in rf.places("x\n<!-- n:cat.gpus -->1<!-- /n -->\n")[1])

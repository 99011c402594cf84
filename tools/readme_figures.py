"""Every figure of the README, written from the tool's own output and checked.

    python tools/readme_figures.py                    # run every source, rewrite README.md and the records
    python tools/readme_figures.py --only fast        # cat + pub live; the slow figures from benchmarks/results.json
    python tools/readme_figures.py --only serving,speed   # refresh these records, rewrite what they give
    python tools/readme_figures.py --check [--only fast]  # exit 1 naming each stale figure; writes nothing
    python tools/readme_figures.py --list             # every marked figure: its source and what the README says

A figure is marked in README.md, invisibly in the rendered Markdown:

    <!-- gen:NAME -->          a table or an excerpt, whole lines
    ...
    <!-- /gen:NAME -->
    <!-- n:NAME -->66<!-- /n -->   a number (or a short phrase) in a sentence or a table cell

and, inside fenced code blocks (where a comment would show), by ANCHORS below: a pattern that must match exactly
once, its group being the figure. NAME is SOURCE.figure. The sources:

    fast (seconds, run live):  cat  the listings (hardware, models, engines), the corpora, the examples, the
                                    configuration vocabulary (specsim/fields.py)
                               pub  specsim validate --published -f json
    recorded (minutes; benchmarks/results.json, with the date, machine and commit of each record):
                               serving  specsim validate --serving -f json
                               kernels  specsim calibrate-tables -H GPU --score-only -f json, per GPU  [tables]
                               modules  specsim validate --modules -f json                            [tables]
                               priors   python benchmarks/priors_floors.py --only corpus --json
                               deploy   python benchmarks/deployment_holdout.py --json
                               speed    the benchmarks' --json (bench_cli, bench_plan, bench_grid, bench_simulate,
                                        bench_costmodel)
                               tests    python benchmarks/bench_tests.py --json (the README's test run, timed)

Writing refreshes the selected records (runs them) and rewrites every figure. `--check` never writes and never
times anything: it runs the selected fast and deterministic recorded sources live, and compares the timings
(speed, tests) with their records. A record's figures are always compared with the record, so `--check --only
fast` (tests/test_readme_figures.py) also proves that the Speed table shows what the benchmarks wrote.
Exit status: 0 up to date (or written); 1 a stale figure, an unknown marker, or a sentence whose claim no longer
holds (reword it by hand); 2 a source failed (a command that fails while someone is mid-edit: run it again).
"""

from __future__ import annotations

import argparse
import datetime
import difflib
import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # python tools/readme_figures.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools import readme_fast, readme_slow, readme_speed
from tools.readme_common import README, RECORDS, Figures, SourceError

FAST: dict[str, Callable[[], Figures]] = {"cat": readme_fast.catalogue, "pub": readme_fast.published}
RecordFigures = Callable[[Mapping[str, Any], Figures], None]
#: name -> (refresh: runs it, figures from its record, deterministic: a check may run it and compare)
RECORDED: dict[str, tuple[Callable[[], dict[str, Any]], RecordFigures | None, bool]] = {
    "serving": (readme_slow.refresh_serving, readme_slow.serving_figures, True),
    "kernels": (readme_slow.refresh_kernels, readme_slow.kernels_figures, True),
    "modules": (readme_slow.refresh_modules, readme_slow.modules_figures, True),
    "priors": (readme_slow.refresh_priors, readme_slow.priors_figures, True),
    "deploy": (readme_slow.refresh_deploy, readme_slow.deploy_figures, True),
    "speed": (readme_speed.refresh_speed, None, False),  # figures: readme_speed.speed_figures (needs serving too)
    "tests": (readme_slow.refresh_tests, readme_slow.tests_figures, False),
}
SOURCES = (*FAST, *RECORDED)
#: a date that moves only when another figure of its source moved (else every day would make it stale)
STICKY = {"pub.date": "pub"}
#: figures inside fenced code blocks: name -> a pattern matching once, group 1 the figure
ANCHORS = {
    "cat.gpus": r"specsim hardware list +# (\d[\d,]*) GPU profiles",
    "cat.models": r"specsim models list +# (\d[\d,]*) model configs",
    "cat.engines": r"specsim engines list +# (.+)",
    "serving.seconds": r"specsim validate --serving +# \[slow\].*\((\d+) s\)",
    **{f"cat.default.{name}": rf"(?m)^{name}: .*# .*\(default ([^)]+)\)$" for name in readme_fast.DEFAULTS_SHOWN},
}
BLOCK = re.compile(r"^(?P<indent>[ \t]*)<!-- gen:(?P<name>[\w.-]+) -->\n"
                   r"(?P<body>.*?)(?P=indent)<!-- /gen:(?P=name) -->", re.S | re.M)
INLINE = re.compile(r"<!-- n:(?P<name>[\w.-]+) -->(?P<body>.*?)<!-- /n -->", re.S)


@dataclass(frozen=True)
class Place:
    """One marked figure in the text: its name, where its value starts and ends, the value there."""

    name: str
    start: int
    end: int
    old: str
    kind: str  # block | inline | anchor
    indent: str = ""  # a block's: each of its lines starts with it (a table inside a list item)

    def text(self, value: str) -> str:
        """`value` as it stands in this place: a block's lines indented, each ending in a newline."""
        if self.kind != "block":
            return value
        return "".join(f"{self.indent}{line}\n" if line else "\n" for line in value.splitlines())


def places(text: str) -> tuple[list[Place], list[str]]:
    """Every marked figure of `text`, and the problems of its anchors (not found once)."""
    out = [Place(m["name"], m.start("body"), m.end("body"), m["body"], "block", m["indent"])
           for m in BLOCK.finditer(text)]
    out += [Place(m["name"], m.start("body"), m.end("body"), m["body"], "inline") for m in INLINE.finditer(text)]
    problems = [f"line {text.count(chr(10), 0, m.start()) + 1}: an inline marker starts a line, where Markdown reads "
                "it as an HTML block: move it into the line" for m in re.finditer(r"(?m)^[ \t]*<!-- n:", text)]
    for name, pattern in ANCHORS.items():
        hits = list(re.finditer(pattern, text))
        if len(hits) != 1:
            problems.append(f"anchor {name}: {pattern!r} matches {len(hits)} times in the README (must be once)")
            continue
        out.append(Place(name, hits[0].start(1), hits[0].end(1), hits[0][1], "anchor"))
    return sorted(out, key=lambda p: p.start), problems


@dataclass(frozen=True)
class Outcome:
    text: str
    stale: list[tuple[Place, str]]
    problems: list[str]


def render(text: str, figures: Mapping[str, str], computed: set[str], today: str) -> Outcome:
    """`text` with every figure of `figures` in place; the stale ones; the problems (a marker of a computed source
    that no figure fills). Markers of sources not computed are left as they are."""
    found, problems = places(text)
    changed_sources = {p.name.split(".")[0] for p in found
                       if p.name in figures and p.name not in STICKY and p.text(figures[p.name]) != p.old}
    stale: list[tuple[Place, str]] = []
    out, at = [], 0
    for p in found:
        source = p.name.split(".")[0]
        if p.name in STICKY:
            new = today if STICKY[p.name] in changed_sources else p.old
        elif p.name in figures:
            new = p.text(figures[p.name])
        else:
            if source in computed:
                problems.append(f"README marks {p.name!r}, which no source gives")
            elif source not in SOURCES:
                problems.append(f"README marks {p.name!r}: {source!r} is no source ({', '.join(SOURCES)})")
            continue
        if new != p.old:
            stale.append((p, new))
        out += [text[at:p.start], new]
        at = p.end
    out.append(text[at:])
    return Outcome("".join(out), stale, problems)


def load_records(path: Path = RECORDS) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {}


def record_figures(records: Mapping[str, Any], f: Figures) -> None:
    """The figures of every recorded source that has a record."""
    for name, (_, figures, _) in RECORDED.items():
        rec = records.get(name)
        if rec is None:
            f.problems.append(f"no record for {name!r} in {RECORDS.name}: python tools/readme_figures.py --only {name}")
        elif figures is not None:
            figures(rec, f)
    if "speed" in records:
        readme_speed.speed_figures(records["speed"], records.get("serving"), f)


def gather(selected: list[str], check: bool, records: dict[str, Any]) -> tuple[Figures, dict[str, Any]]:
    """Every figure the selection gives, and the records as they now stand (refreshed where written)."""
    f = Figures()
    live = dict(records)
    fast = [n for n in selected if n in FAST]
    with ThreadPoolExecutor(max(1, len(fast))) as pool:  # mostly waiting on specsim subprocesses
        for got in pool.map(lambda n: FAST[n](), fast):
            f.update(got)
            f.problems += got.problems
    for name in selected:
        if name in FAST or (check and not RECORDED[name][2]):
            continue
        print(f"{name}: running (minutes)", file=sys.stderr, flush=True)
        live[name] = {**readme_slow.machine(), "data": RECORDED[name][0]()}
        if not check:  # kept at once: a later source that fails does not lose it
            write(RECORDS, json.dumps(live, indent=1, sort_keys=True) + "\n")
    record_figures(live, f)
    return f, live


def report_stale(stale: list[tuple[Place, str]]) -> None:
    for p, new in stale:
        if p.kind == "block":
            diff = difflib.unified_diff(p.old.splitlines(), new.splitlines(), "README", "tool", lineterm="", n=0)
            lines = [line for line in diff if not line.startswith(("---", "+++", "@@"))]
            print(f"stale {p.name} ({len(lines)} lines differ):\n  " + "\n  ".join(lines[:12]))
        else:
            print(f"stale {p.name}: the README says {p.old!r}, the tool {new!r}")


def select(only: str, skip: str) -> list[str]:
    names = {"fast": list(FAST), "all": list(SOURCES)}.get(only, [n for n in only.split(",") if n])
    unknown = [n for n in names + skip.split(",") if n and n not in SOURCES]
    if unknown:
        raise SystemExit(f"unknown source {unknown[0]!r}: fast, all, or some of {', '.join(SOURCES)}")
    return [n for n in names if n not in skip.split(",")]


def list_places(text: str) -> None:
    found, problems = places(text)
    for p in found:
        lines = p.old.splitlines() or [""]
        more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
        print(f"{p.name:34s} {p.kind:6s} {lines[0][:70]!r}{more}")
    for line in problems:
        print(line)


def write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each stale figure")
    ap.add_argument("--only", default="all", help=f"fast | all | some of {','.join(SOURCES)}")
    ap.add_argument("--skip", default="", help="sources to leave out (e.g. tests)")
    ap.add_argument("--list", action="store_true", help="list the marked figures and exit")
    ap.add_argument("--readme", type=Path, default=README, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.list:
        list_places(args.readme.read_text())
        return 0
    selected = select(args.only, args.skip)
    try:
        figures, live = gather(selected, args.check, load_records())
    except SourceError as e:
        print(f"a source failed: {e}", file=sys.stderr)
        return 2
    text = args.readme.read_text()  # read after the sources ran (minutes), so that no edit meanwhile is lost
    computed = {n for n in selected if n in FAST} | {n for n in RECORDED if n in live}
    out = render(text, figures, computed, datetime.date.today().isoformat())
    problems = figures.problems + out.problems
    report_stale(out.stale)
    for line in problems:
        print(f"problem: {line}")
    if args.check:
        print(f"{len(out.stale)} stale figure(s), {len(problems)} problem(s)", file=sys.stderr)
        return 1 if out.stale or problems else 0
    if out.text != text:
        write(args.readme, out.text)
    print(f"{len(out.stale)} figure(s) rewritten; {len(problems)} problem(s)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

"""Writing a report: `specsim report SCENARIO.yaml -o DIR` writes DIR/report.md, DIR/report.html (one
self-contained file: figures embedded as base64 PNG, no external CSS, JS or fonts), DIR/figures/*.png
DIR/plan.json and each engine's configuration as DIR/engine-configs/ENGINE.json (linked from both
reports), as one set.

The plan's numbers come from one place, `summary.plan_dict` (what `specsim plan --format json`
prints): plan.json is that record, report.md's plan table is `summary.plan_markdown`, and every
derived figure (cost, GPUs) is computed from those rows. The whole report is built in a temporary
folder beside DIR that then replaces DIR in one rename (`files.output_folder`): DIR may only be new,
empty or an earlier report (marked `.specsim-report`); a user's own files there are kept; on any
failure DIR is untouched and nothing is left behind.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from specsim.files import check_folder_target, output_folder
from specsim.report import assemble
from specsim.report.context import Progress, Section
from specsim.report.figures import saving as fg
from specsim.report.html import markdown_to_html
from specsim.scenario.scenario import Scenario, load_scenario

OUTPUTS = ("report.html", "report.md", "plan.json", "figures", "engine-configs")


@dataclass(frozen=True)
class WrittenReport:
    """What a report wrote: its folder, its figures' file names, the sections' own files (relative paths) and
    the recommendation."""

    dir: Path
    figures: tuple[str, ...]
    files: tuple[str, ...]
    recommendation: str


def write_report(scenario: str | Path | Scenario, out: str | Path, reference: Path | None = None,
                 progress: Progress | None = None, dpi: int = 100) -> WrittenReport:
    """Build the report for a scenario (file) into folder `out`; nothing is left half-written on error."""
    s = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
    out = Path(out)
    check_folder_target(out, OUTPUTS)  # before the work: a file, a symlink or someone else's folder is refused
    c, sections = assemble.build_sections(s, reference, progress)
    if progress:
        progress(assemble.STEPS[-1])
    names = []
    with output_folder(out, OUTPUTS) as tmp:
        (tmp / "figures").mkdir()
        jobs = [(sec.figure, str(tmp / "figures" / f"{sec.figure_name}.png")) for sec in sections
                if sec.figure is not None]
        fg.save_pngs(jobs, dpi)
        names = [Path(path).name for _, path in jobs]
        extra = _write_section_files(tmp, sections)
        (tmp / "plan.json").write_text(json.dumps(c.data, indent=2, default=float) + "\n")
        md = assemble.render_markdown(c, sections)
        (tmp / "report.md").write_text(md)
        (tmp / "report.html").write_text(markdown_to_html(md, tmp, f"specsim report: {s.name}"))
    return WrittenReport(out, tuple(names), tuple(extra), str(c.data["recommendation"]))


def _write_section_files(tmp: Path, sections: list[Section]) -> list[str]:
    """The sections' own files (engine configurations) into the staged report folder; their relative paths."""
    written = []
    for sec in sections:
        for rel, text in sec.files.items():
            path = PurePosixPath(rel)
            if path.is_absolute() or ".." in path.parts or path.parts[0] not in OUTPUTS:
                raise ValueError(f"a report file must lie in one of the report's folders: {rel}")
            target = tmp.joinpath(*path.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            written.append(rel)
    return written

"""`specsim report`: its numbers are the plan's (read back out of report.md and plan.json), its HTML
is self-contained, its figures are labelled, bad input leaves nothing half-written, and each
bundled scenario's report builds in under 10 s."""

from __future__ import annotations

import base64
import html
import json
import re
import time
from pathlib import Path

import numpy as np
import pytest

from specsim.acceptance.chain import AcceptanceProfile
from specsim.advise.plan import plan_scenario as plan
from specsim.cli.main import main
from specsim.drafts.build import make_draft
from specsim.errors import SpecsimError
from specsim.plan import capacity as capacity_mod
from specsim.plan.decide import target_of
from specsim.plan.summary import plan_dict
from specsim.report import assemble, context, fleet, write
from specsim.report.html import markdown_to_html
from specsim.report.sections import capacity, heatmap, policy, sensitivity
from specsim.scenario.scenario import load_scenario, parse_scenario
from specsim.step.evaluate import config_metrics

SCENARIOS = sorted((Path(__file__).resolve().parents[2] / "scenarios").glob("*.yaml"))
BUILT: dict[str, tuple[Path, float]] = {}


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def _report(path: Path, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
            ) -> tuple[Path, float]:
    """Each bundled scenario's report, built once through the CLI and timed."""
    if path.stem not in BUILT:
        out = tmp_path_factory.mktemp("reports") / path.stem
        t0 = time.perf_counter()
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("COLUMNS", "80")
            code, stdout, err = _run(capsys, "report", str(path), "-o", str(out))
        BUILT[path.stem] = (out, time.perf_counter() - t0)
        assert code == 0, err
        assert "wrote" in stdout
        # the answer at 80 columns, wrapped at spaces: every line fits, or is one word (a long path) alone
        assert all(len(line) <= 80 or len(line.split()) == 1 for line in stdout.splitlines()), stdout
        rec = json.loads((out / "plan.json").read_text())["recommendation"]
        assert " ".join(stdout.split()).startswith(rec)
    return BUILT[path.stem]


def _tables(md: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every Markdown table as (header, rows of cells)."""
    out, block = [], []
    for line in [*md.split("\n"), ""]:
        if line.startswith("|"):
            block.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif block:
            out.append((block[0], block[2:]))
            block = []
    return out


def _table(md: str, first_columns: list[str]) -> tuple[list[str], list[list[str]]]:
    return next(t for t in _tables(md) if t[0][:len(first_columns)] == first_columns)


def _num(cell: str) -> float:
    return float(cell.replace(",", "").replace("$", "").rstrip("x"))


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_report_numbers_are_the_plans(path: Path, tmp_path_factory: pytest.TempPathFactory,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    out, _seconds = _report(path, tmp_path_factory, capsys)
    code, stdout, err = _run(capsys, "plan", str(path), "--format", "json")
    assert code == 0, err
    data = json.loads(stdout)
    # plan.json is `specsim plan --format json`, field for field
    assert json.loads((out / "plan.json").read_text()) == data
    md = (out / "report.md").read_text()
    assert f"> **Recommendation:** {data['recommendation']}" in md.split("\n")
    # the answer comes first: the recommendation precedes every section
    assert md.index(data["recommendation"]) < md.index("## ")
    # the plan table, read back cell by cell (as rounded in the Markdown)
    head, rows = _table(md, ["bucket", "batch", "context", "draft", "k"])  # (then "tree" for tree plans)
    assert len(rows) == len(data["buckets"])
    decimals = {"tokens/step": ("tokens_per_step", 2), "step ms": ("step_ms", 2),
                "baseline ms": ("baseline_step_ms", 2), "speedup": ("speedup", 2), "tok/s": ("throughput_tok_s", 0),
                "ms/token": ("ms_per_token", 2)}
    for cells, want in zip(rows, data["buckets"], strict=True):
        got = dict(zip(head, cells, strict=True))
        assert got["bucket"] == want["bucket"] and got["draft"] == want["draft"]
        assert int(got["batch"]) == want["batch"] and int(got["context"]) == want["context"]
        assert int(got["k"]) == want["k"]
        for col, (field, places) in decimals.items():
            assert _num(got[col]) == pytest.approx(round(want[field], places), abs=10 ** -places / 2 + 1e-9), col
    # the verification table's decode and verify pass times are the plan's: the verify pass is plan.json's, the
    # decode pass is `evaluate`'s plain-decoding pass at the same batch and context (the baseline step less the
    # engine's step overhead)
    s = load_scenario(path)
    t, none = target_of(s), make_draft("none", s.model)
    head, rows = _table(md, ["bucket", "batch", "context", "k", "tokens per pass"])
    for cells, want in zip(rows, data["buckets"], strict=True):
        got = dict(zip(head, cells, strict=True))
        decode = float(config_metrics(t, none, 0, want["batch"], want["context"]).verify_ms)
        assert _num(got["decode pass ms"]) == pytest.approx(decode, abs=0.005)
        assert decode < want["baseline_step_ms"]
        verify = want["verify_ms"] if want["k"] else decode
        assert _num(got["verify pass ms"]) == pytest.approx(verify, abs=0.005)
    # GPU-equivalents recomputed from plan.json's throughput (the cost of a token: test_one_cost_per_configuration)
    if s.arrival is None:
        head, rows = _table(md, ["bucket", "batch", "tok/s without", "tok/s with"])
        for cells, want in zip(rows, data["buckets"], strict=True):
            got = dict(zip(head, cells, strict=True))
            assert _num(got["tok/s with"]) == pytest.approx(want["throughput_tok_s"], abs=0.5)
            assert _num(got["tok/s without"]) == pytest.approx(want["baseline_throughput_tok_s"], abs=0.5)
            gpus = s.tp * want["baseline_throughput_tok_s"] / want["throughput_tok_s"]
            central, _, band = got["GPUs with (80% band)"].partition(" (")
            assert _num(central) == pytest.approx(gpus, abs=0.005)
            if want["k"]:  # the band brackets it
                low, high = (_num(x) for x in band.rstrip(")").split("-"))
                assert low <= gpus + 0.005 and gpus - 0.005 <= high
    # the HTML carries the same recommendation
    page = html.unescape((out / "report.html").read_text())
    assert data["recommendation"] in page
    # Build time (< 10 s per scenario) is measured by benchmarks/bench_report.py, not asserted here.


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_html_is_self_contained(path: Path, tmp_path_factory: pytest.TempPathFactory,
                                capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = _report(path, tmp_path_factory, capsys)
    page = (out / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    for banned in ("<script", "<link", "@import", "url(", "@font-face"):
        assert banned not in page, banned
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page)
    srcs = re.findall(r'<img [^>]*src="([^"]+)"', page)
    pngs = sorted((out / "figures").glob("*.png"))
    # seven sections draw a figure; with traffic, the serving simulation and the throughput-interactivity
    # frontier add one each
    # and a prior's acceptance band, the choice against acceptance (tests/report/test_choice_figure.py)
    choice = int((out / "figures" / "choice.png").exists())
    agentic = int("sessions" in load_scenario(path).raw.get("traffic", {}))  # agent sessions' own section
    assert len(srcs) == len(pngs) == (9 if "traffic" in load_scenario(path).raw else 7) + choice + agentic
    embedded = {base64.b64decode(src.removeprefix("data:image/png;base64,")) for src in srcs}
    assert all(src.startswith("data:image/png;base64,") for src in srcs)
    assert embedded == {p.read_bytes() for p in pngs}
    md = (out / "report.md").read_text()
    assert {m for m in re.findall(r"\]\((figures/[^)]+\.png)\)", md)} == {f"figures/{p.name}" for p in pngs}


def _has_units(label: str) -> bool:
    return bool(re.search(r"\([^)]+\)\s*$", label))


@pytest.mark.parametrize("name", ["chat-llama70b-h100", "reasoning-h200"])
def test_every_figure_titled_labelled_with_units_and_legended(name: str) -> None:
    s = load_scenario(next(p for p in SCENARIOS if p.stem == name))
    _, sections = assemble.build_sections(s)
    figs = [sec for sec in sections if sec.figure is not None]
    # seven, and the plan's choice against its prior's acceptance band where its chosen draft has one
    choice = any(sec.figure_name == "choice" for sec in figs)
    assert len(figs) == 7 + choice and (choice or name != "chat-llama70b-h100")
    for sec in figs:
        fig = sec.figure
        assert fig is not None
        suptitle = fig._suptitle.get_text() if fig._suptitle is not None else ""
        for ax in fig.axes:
            if ax.get_label() == "<colorbar>":
                assert _has_units(ax.get_ylabel()), sec.figure_name
                continue
            assert ax.get_title() or suptitle, sec.figure_name
            assert _has_units(ax.get_xlabel()), (sec.figure_name, ax.get_xlabel())
            assert _has_units(ax.get_ylabel()), (sec.figure_name, ax.get_ylabel())
            labelled = [lab for lab in ax.get_legend_handles_labels()[1] if not lab.startswith("_")]
            # every labelled series is named in the axes' own legend or in one the figure shares across axes
            shown = {t.get_text() for lg in [ax.get_legend(), *fig.legends] if lg is not None for t in lg.get_texts()}
            if len(labelled) > 1 or ax.get_legend() is not None:
                assert set(labelled) <= shown, (sec.figure_name, set(labelled) - shown)


def test_bad_scenario_exit_2_and_nothing_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("hardware: h100-sxm\nmodel: llama-3.1-8b\ndrafts: [warp]\nload: {buckets: [{batch: 8}]}\n")
    code, _, err = _run(capsys, "report", str(bad), "-o", str(tmp_path / "out"))
    assert code == 2 and "unknown draft 'warp'" in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]


def test_failure_midway_leaves_the_old_report(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "rep"
    scenario = str(next(p for p in SCENARIOS if p.stem == "deepseek-v3-mtp"))
    assert _run(capsys, "report", scenario, "-o", str(out))[0] == 0
    (out / "notes.txt").write_text("mine")
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def boom(*_a: object, **_k: object) -> str:
        raise SpecsimError("disk full (simulated)")

    monkeypatch.setattr(assemble, "render_markdown", boom)
    code, _, err = _run(capsys, "report", scenario, "-o", str(out))
    assert code == 2 and "disk full" in err
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]  # no temporary folder left behind


def test_rerun_replaces_report_files_only(tmp_path: Path) -> None:
    out = tmp_path / "rep"
    path = next(p for p in SCENARIOS if p.stem == "llama8b-1b-draft-h100")
    write.write_report(path, out)
    (out / "notes.txt").write_text("mine")
    (out / "figures" / "stale.png").write_bytes(b"old")
    write.write_report(path, out)
    assert (out / "notes.txt").read_text() == "mine"
    assert not (out / "figures" / "stale.png").exists()
    assert len(list((out / "figures").glob("*.png"))) == 8
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]


def test_scaled_acceptance_is_clipped_and_replans() -> None:
    p = AcceptanceProfile((0.95, 0.9), 0.8, "x")
    up = sensitivity.scale_profile(p, 1.1)
    assert up.rates == (1.0, pytest.approx(0.99)) and up.tail == pytest.approx(0.88)
    assert sensitivity.scale_profile(p, 0.5).rates == (0.475, 0.45)
    s = load_scenario(next(p for p in SCENARIOS if p.stem == "llama8b-1b-draft-h100"))
    gains = [plan(sensitivity.with_acceptance(s, f)).gain for f in (1.0, 0.9, 0.8)]
    assert gains[0] > gains[1] > gains[2] > 1.0
    md = "\n".join(sec.body for sec in assemble.build_sections(s)[1] if sec.title == "Sensitivity")
    _, rows = _table(md, ["acceptance", "recommendation"])
    assert [_num(r[2]) for r in rows] == [pytest.approx(round(g, 2), abs=0.005) for g in gains]


def test_heatmap_agrees_with_plan_at_the_assumed_alpha() -> None:
    """The heat map's optimal k at a bucket's (batch, alpha) is the plan's k, or one within 2% of it (the plan's
    deployed schedule must not raise k with batch, which can cost it a percent at a tile step)."""
    from specsim.step.evaluate import config_metrics

    for batch, alpha in ((1, 0.8), (16, 0.7), (64, 0.5), (128, 0.3)):
        s = parse_scenario({"hardware": "h100-sxm", "model": "llama-3.1-8b",
                            "drafts": [{"method": "eagle3", "acceptance": {"alpha": alpha}}],
                            "load": {"buckets": [{"batch": batch, "context": 2048}]}}, "x")
        c = context.make_ctx(s)
        c.grid = np.array([float(batch)])
        best = heatmap.optimal_k_grid(c, s.drafts[0], np.array([alpha]))
        chosen = c.plan.buckets[0].k
        if best[0, 0] != chosen:
            thr = [float(config_metrics(c.t, s.drafts[0], k, batch, 2048).throughput_tok_s)
                   for k in (chosen, best[0, 0])]
            assert thr[0] >= 0.98 * thr[1], (batch, alpha)


def test_arrival_capacity_is_on_the_slo_boundary() -> None:
    """One replica's capacity within the SLO is where the planner's own Little's-law solver crosses the SLO;
    with no SLO given the assumed one is plain decoding's latency at the scenario's rate."""
    s = load_scenario(next(p for p in SCENARIOS if p.stem == "reasoning-h200"))
    c = context.make_ctx(s)
    rm = policy.rate_model(c)
    a = s.arrival
    assert a is not None and c.plan.arrival is not None and c.draft is not None
    assert rm.slo_ms == pytest.approx(c.plan.arrival.baseline_ms_per_token)
    none = make_draft("none", s.model)
    estimate = capacity_mod.max_rate_rps(rm.curves[0], rm.slo_ms)
    base = capacity_mod.solver_max_rate(c.t, none, 0, a, rm.slo_ms, estimate)
    assert base == pytest.approx(a.rate_rps, rel=0.01)
    for k in (2, 4):
        est = capacity_mod.max_rate_rps(rm.curves[k], rm.slo_ms)
        cap = capacity_mod.solver_max_rate(c.t, c.draft, k, a, rm.slo_ms, est)
        assert cap > 1.5 * base and cap == pytest.approx(est, rel=0.1)
        assert capacity_mod.latency_at_rate_ms(c.t, c.draft, k, a, cap) <= rm.slo_ms
        assert capacity_mod.latency_at_rate_ms(c.t, c.draft, k, a, cap * 1.01) > rm.slo_ms
    md = capacity.capacity_section(c, rm, _fleet(c, rm)).body
    _, rows = _table(md, ["", "without speculation"])
    got = {r[0]: r[1:] for r in rows}
    assert _num(got["requests/s one replica serves within the SLO"][0]) == pytest.approx(base, rel=1e-2)
    # with speculation: the configuration the plan deploys (its k at the scenario's rate), not another k
    k = c.plan.buckets[0].k
    deployed = capacity_mod.solver_max_rate(c.t, c.draft, k, a, rm.slo_ms,
                                            capacity_mod.max_rate_rps(rm.curves[k], rm.slo_ms))
    assert _num(got["requests/s one replica serves within the SLO"][1]) == pytest.approx(deployed, rel=5e-3)
    assert f"with speculation ({c.draft.label}, k = {k})" in md
    assert got["GPUs for 0.5 req/s"] == [str(s.tp), str(s.tp)]  # the scenario's own rate: one replica either way
    assert _num(got["GPUs for 4 req/s"][1]) < _num(got["GPUs for 4 req/s"][0])


def test_bucket_cost_over_the_day_is_throughput_weighted() -> None:
    s = load_scenario(next(p for p in SCENARIOS if p.stem == "chat-llama70b-h100"))
    c = context.make_ctx(s)
    text = capacity.capacity_section(c, None, _fleet(c, None)).body
    m = re.search(r"\$([\d.]+) per million output tokens without speculation, \$([\d.]+) with", text)
    assert m is not None
    without, with_ = float(m.group(1)), float(m.group(2))
    data = plan_dict(c.plan)
    thr = sum(r["weight"] * r["throughput_tok_s"] for r in data["buckets"])
    assert with_ == pytest.approx(s.tp * s.gpu_hour_usd / (thr * 3600) * 1e6, abs=0.0005)
    assert without / with_ == pytest.approx(c.plan.gain, rel=0.01)  # throughput objective: cost ratio = gain


def test_no_price_no_dollars() -> None:
    s = parse_scenario({"hardware": "h100-sxm", "model": "llama-3.1-8b", "drafts": ["eagle3"],
                        "load": {"buckets": [{"batch": 8}]}}, "x")
    c = context.make_ctx(s)
    sec = capacity.capacity_section(c, None, _fleet(c, None))
    assert "no `gpu_hour_usd`" in sec.body and "$/M" not in sec.body and "$0" not in sec.body
    assert sec.figure is not None and len(sec.figure.axes) == 1


def _fleet(c: context.Ctx, rm: policy.RateModel | None) -> fleet.Fleet:
    return fleet.fleet(c, rm.slo_ms if rm else None, rm.curves if rm else None)


DOLLARS = re.compile(r"\$(\d[\d,]*\.\d+)")


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_one_capacity_and_one_cost_per_configuration(path: Path, tmp_path_factory: pytest.TempPathFactory,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Every dollar figure of a report (the GPU-hour price aside) is one of two costs per million output tokens,
    plain decoding's and speculation's, each recomputed here from plan.json: the simulated fleet's for an SLO sized
    by simulation, the day's mean token rates for load buckets, a replica at its SLO-bound rate (the report's one
    capacity row) for an arrival rate. The capacity a replica serves is quoted in one row."""
    out, _ = _report(path, tmp_path_factory, capsys)
    md = (out / "report.md").read_text()
    data = json.loads((out / "plan.json").read_text())
    s = load_scenario(path)
    found = {float(x.replace(",", "")) for x in DOLLARS.findall(md)}
    if s.gpu_hour_usd is None:
        assert not found
        return
    price = s.gpu_hour_usd

    def per_mtok(gpus: float, tok_s: float) -> float:
        return round(gpus * price / 3600 / tok_s * 1e6, 3)

    if data["serving"] is not None:
        sv = data["serving"]
        want = {round(sv["baseline"]["cost_per_mtok_usd"], 3), round(sv["cost_per_mtok_usd"], 3)}
        _, rows = _table(md, ["", "without speculation"])
        got = {r[0]: r[1:] for r in rows}
        rate = sv["target_rate_rps"]
        for cell, replicas in zip(got["requests/s one replica serves within the SLO"],
                                  (sv["baseline"]["replicas"], sv["replicas"]), strict=True):
            assert _num(cell) == pytest.approx(rate / replicas, rel=5e-3)  # printed to 3 digits
    elif s.arrival is not None:
        _, rows = _table(md, ["", "without speculation"])
        caps = [r for r in rows if r[0].startswith("requests/s one replica serves")]
        assert len(caps) == 1
        want = {per_mtok(s.gpus, _num(x) * s.arrival.output_tokens) for x in caps[0][1:]}
    else:
        w = np.array([r["weight"] for r in data["buckets"]])
        thr = float((w * [r["throughput_tok_s"] for r in data["buckets"]]).sum() / w.sum())
        base = float((w * [r["baseline_throughput_tok_s"] for r in data["buckets"]]).sum() / w.sum())
        want = {per_mtok(s.gpus, base), per_mtok(s.gpus, thr)}
    costs = sorted(found - {price})
    assert len(costs) == len(want), (costs, want)  # no third figure for either configuration
    tol = 0.01 if s.arrival is not None and data["serving"] is None else 0.0  # from a capacity printed to 3 digits
    for x in costs:
        assert any(x == pytest.approx(y, rel=tol, abs=1.5e-3) for y in want), (x, want)
    for y in want:
        assert any(x == pytest.approx(y, rel=tol, abs=1.5e-3) for x in costs), (y, costs)
    assert md.count("requests/s one replica serves") <= 1


def test_markdown_to_html_subset(tmp_path: Path) -> None:
    md = "# T <1>\n\n| a | b |\n|---|---:|\n| x & y | **2** |\n\n> note `c`\n\n- one\n- two\n\n```\n<raw>\n```\n"
    page = markdown_to_html(md, tmp_path, "t")
    assert '<h1 id="t-1">T &lt;1&gt;</h1>' in page
    assert '<td class="r"><strong>2</strong></td>' in page and "<td >x &amp; y</td>" in page
    assert "<blockquote>note <code>c</code></blockquote>" in page and "<li>two</li>" in page
    assert "&lt;raw&gt;" in page

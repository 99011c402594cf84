"""The report's figures as a reader sees them, read back from the matplotlib objects: nothing clipped or hidden
under a legend (the one-draft DeepSeek report had a cut title and a label under the legend), best-k curves that
stop where nothing fits instead of plunging, bucket marks that agree with their curves (trees included), and a
verification figure priced the way the engine runs the pass, as the table beside it is."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from specsim.cost.forward import breakdown
from specsim.cost.ops import make_shape
from specsim.engines.passes import pass_time_s
from specsim.plan.candidates import evaluate_draft
from specsim.report import assemble, context
from specsim.report.context import Ctx
from specsim.report.figures.drawing import new_figure
from specsim.report.figures.saving import save_png
from specsim.report.sections.speedup import speedup_section
from specsim.report.sections.verification import verification_section
from specsim.scenario.scenario import load_scenario
from specsim.step.evaluate import memory_per_gpu

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
_CTX: dict[str, Ctx] = {}


def ctx(name: str) -> Ctx:
    if name not in _CTX:
        _CTX[name] = context.make_ctx(load_scenario(SCENARIOS / f"{name}.yaml"))
    return _CTX[name]


def layout_problems(fig: Figure) -> list[str]:
    """Text a reader cannot read: an axes' drawn extent (title, labels, tick labels, annotations), the figure's
    title or a figure legend reaching past the canvas (clipped in the PNG), or an annotation under a legend."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    page = fig.bbox
    out = []
    boxes = [(f"axes '{ax.get_title()}'", ax.get_tightbbox(r)) for ax in fig.axes]
    title = fig._suptitle  # type: ignore[attr-defined]
    if title is not None:
        boxes.append(("title", title.get_window_extent(r)))
    boxes += [("figure legend", lg.get_window_extent(r)) for lg in fig.legends]
    for what, bb in boxes:
        if bb is not None and (bb.x0 < page.x0 - 1 or bb.x1 > page.x1 + 1 or bb.y0 < page.y0 - 1
                               or bb.y1 > page.y1 + 1):
            out.append(f"{what} is clipped: {bb.extents} outside {page.extents}")
    legends = [lg for lg in [ax.get_legend() for ax in fig.axes] if lg is not None] + list(fig.legends)
    for ax in fig.axes:
        for t in ax.texts:
            if t.get_visible() and t.get_text().strip():
                for lg in legends:
                    if t.get_window_extent(r).overlaps(lg.get_window_extent(r)):
                        out.append(f"'{t.get_text()}' is hidden under a legend")
    return out


def test_layout_check_sees_a_clipped_title_and_a_hidden_label() -> None:
    fig, (ax,) = new_figure(5.2, 4.6)
    ax.plot([1, 2], [1, 2], label="a")
    ax.plot([1, 2], [2, 1], label="b")
    ax.annotate("peak", (1.95, 1.95))
    ax.legend(loc="upper right", fontsize=14)
    fig.suptitle("a scenario: speedup against batch for each draft and k (below 1: speculation hurts)")
    found = layout_problems(fig)
    assert any("title is clipped" in p for p in found) and any("'peak'" in p for p in found)


def test_deepseek_report_figures_are_not_clipped_or_hidden() -> None:
    """The one-draft DeepSeek scenario of the bug report: every figure of its report."""
    _, sections = assemble.build_sections(load_scenario(SCENARIOS / "deepseek-v3-mtp.yaml"))
    figs = [sec for sec in sections if sec.figure is not None]
    assert len(figs) == 8  # seven, and the plan's choice against its prior's acceptance band
    for sec in figs:
        assert sec.figure is not None
        assert layout_problems(sec.figure) == [], sec.figure_name


@pytest.mark.parametrize("name", ["long-context-h200", "code-edit-prompt-lookup", "llama8b-1b-draft-h100"])
def test_speedup_and_verification_figures_fit_with_several_drafts(name: str) -> None:
    c = ctx(name)
    for sec in (speedup_section(c), verification_section(c)):
        assert sec.figure is not None
        assert layout_problems(sec.figure) == [], (name, sec.figure_name)


def _line(ax: object, prefix: str) -> Line2D:
    return next(ln for ln in ax.get_lines() if ln.get_label().startswith(prefix))  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["deepseek-v3-mtp", "code-edit-prompt-lookup"])
def test_best_k_is_a_gap_where_no_speculative_configuration_fits(name: str) -> None:
    """Where even k = 1 (the smallest speculative footprint) does not fit at the load's contexts, the best-k curve
    has no point (NaN), not plain decoding's 1x; where k = 1 fits it has one, and never below where the chain
    of k = 1 is."""
    c = ctx(name)
    fig = speedup_section(c).figure
    assert fig is not None
    contexts = [x for x, _ in c.pooled]
    checked = 0
    for ax, d in zip(fig.axes, c.s.drafts, strict=True):
        best = _line(ax, "best")
        k1 = _line(ax, "k = 1")
        xs, ys, k1y = (np.asarray(v, dtype=float) for v in (best.get_xdata(), best.get_ydata(), k1.get_ydata()))
        fits = np.array([all(bool(memory_per_gpu(c.t, d, 1, b, x).fits) for x in contexts) for b in xs])
        assert np.all(np.isnan(ys[~fits])) and np.all(np.isfinite(ys[fits])), d.label
        assert np.all(ys[fits] >= k1y[fits] - 1e-9)
        checked += int((~fits).sum())
    if name == "deepseek-v3-mtp":
        assert checked > 0  # the grid reaches past where the KV cache fits (the plunge of the bug report)


def test_tree_buckets_sit_on_or_under_a_curve_that_includes_trees() -> None:
    """llama8b-1b-draft-h100 planned for SGLang (which runs a tree per batch band) uses trees at its quieter buckets
    (every bucket at context 2048, so the curves' contexts are the buckets'): each red mark is at or under the best
    curve at its batch, tree marks are drawn and named as trees, and each mark is the plan's speedup for that
    bucket."""
    import dataclasses

    from specsim.engines.profile import load_engine

    s = load_scenario(SCENARIOS / "llama8b-1b-draft-h100.yaml")
    c = context.make_ctx(dataclasses.replace(s, engine=load_engine("sglang")))
    assert any(bp.topk > 1 for bp in c.plan.buckets)
    fig = speedup_section(c).figure
    assert fig is not None
    names = {d.label: ax for ax, d in zip(fig.axes, c.s.drafts, strict=True)}
    for bp in c.plan.buckets:
        if not bp.k:
            continue
        ax = names[bp.draft]
        tree = bp.topk > 1
        marks = _line(ax, f"the plan's buckets: {'trees' if tree else 'chains'}")
        xs, ys = np.asarray(marks.get_xdata(), float), np.asarray(marks.get_ydata(), float)
        want = sum(r.share * r.speedup for r in bp.rows)
        i = int(np.flatnonzero(xs == bp.bucket.batch)[0])
        assert ys[i] == pytest.approx(want)
        best = _line(ax, "best")
        bx, by = np.asarray(best.get_xdata(), float), np.asarray(best.get_ydata(), float)
        j = int(np.flatnonzero(bx == bp.bucket.batch)[0])
        assert ys[i] <= by[j] + 1e-9, bp.bucket.name
        label = next(t.get_text() for t in ax.texts if t.get_text().startswith(f"{bp.bucket.name}:"))
        assert ("tree" in label) == tree
    # the best curve is the plan's own evaluation, trees included: at a tree bucket it beats every chain
    quiet = next(bp for bp in c.plan.buckets if bp.topk > 1)
    d = c.draft_by_label(quiet.draft)
    assert d is not None
    ev = evaluate_draft(c.t, d, c.s.max_k, np.array([float(quiet.bucket.batch)]), np.array([2048.0]))
    chains = max(float(ev.values["speedup"][i, 0]) for i, cfg in enumerate(ev.configs)
                 if cfg.k and not cfg.is_tree and ev.feasible[i, 0])
    ax = names[quiet.draft]
    best = _line(ax, "best")
    j = int(np.flatnonzero(np.asarray(best.get_xdata(), float) == quiet.bucket.batch)[0])
    assert float(np.asarray(best.get_ydata(), float)[j]) > chains


def _md_table(md: str, first: str) -> list[dict[str, str]]:
    lines = [ln for ln in md.split("\n") if ln.startswith("|")]
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"| {first} |"))
    head = [x.strip() for x in lines[start].strip("|").split("|")]
    rows = []
    for ln in lines[start + 2:]:
        cells = [x.strip() for x in ln.strip("|").split("|")]
        if len(cells) != len(head):
            break
        rows.append(dict(zip(head, cells, strict=True)))
    return rows


@pytest.mark.parametrize("name", ["deepseek-v3-mtp", "chat-llama70b-h100", "code-edit-prompt-lookup"])
def test_verification_figure_totals_are_the_tables_pass_times(name: str) -> None:
    """(b): each bucket's whole-pass curve goes through the table's verify pass at the table's tokens per pass
    (a tree verifies nodes + 1 tokens a sequence, an n-gram batch a fractional count) and starts at its decode
    pass; (a): the stacked pass (attention aside) plus attention is the engine's pass time (custom all-reduce in a
    CUDA graph on 8x H200), not eager NCCL's."""
    c = ctx(name)
    sec = verification_section(c)
    fig = sec.figure
    assert fig is not None
    a, b = fig.axes[:2]
    rows = _md_table(sec.body, "bucket")
    assert len(rows) == len(c.data["buckets"])
    for row, want in zip(rows, c.data["buckets"], strict=True):
        label = f"{row['bucket']} B={row['batch']}: whole pass"
        line = _line(b, label)
        xs, ys = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
        tokens = float(row["tokens per pass"])
        i = int(np.argmin(abs(xs - tokens)))
        assert xs[i] == pytest.approx(tokens, abs=0.05 + 1e-9)
        assert ys[i] == pytest.approx(float(row["verify pass ms"]), abs=0.005)
        assert ys[i] == pytest.approx(want["verify_ms"], rel=1e-9)
        assert xs[0] == float(row["batch"]) and ys[0] == pytest.approx(float(row["decode pass ms"]), abs=0.005)
    t, e = c.t, c.t.engine
    ctx_main = max(c.pooled, key=lambda cw: cw[1])[0]
    stacks = a.collections
    top = np.asarray(stacks[len(stacks) - 1].get_paths()[0].vertices)  # the last layer's outline: its top edge
    for T in (64.0, 256.0, 512.0):  # captured graph sizes: no padding
        if max(float(x) for x in top[:, 0]) < T:
            continue
        stacked = float(top[np.isclose(top[:, 0], T), 1].max())
        attention = float(breakdown(t.model, t.hardware, make_shape(T, 1.0, ctx_main, t.tp, t.weight_dtype,
                                                                    t.kv_dtype, e.allreduce)).by_family()["attention"])
        engine = float(pass_time_s(e, t.hardware, t.model, T, 1.0, ctx_main, t.tp, t.weight_dtype, t.kv_dtype))
        assert stacked + attention * 1e3 == pytest.approx(engine * 1e3, rel=1e-6), T
    if c.s.tp > 1:
        legend_a = a.get_legend()
        assert legend_a is not None
        legend = [txt.get_text() for txt in legend_a.get_texts()]
        assert any(lab.startswith(f"all-reduce ({e.allreduce} in a CUDA graph") for lab in legend)


def test_saving_a_figure_once_gives_savefigs_pixels(tmp_path: Path) -> None:
    """`save_png` draws a figure once (layout inside the draw) rather than savefig's twice: the same image."""
    import matplotlib.image as mpimg

    c = ctx("deepseek-v3-mtp")
    fig = speedup_section(c).figure
    assert fig is not None
    save_png(fig, str(tmp_path / "once.png"))
    fig.savefig(tmp_path / "twice.png", dpi=100, format="png")
    once, twice = mpimg.imread(tmp_path / "once.png"), mpimg.imread(tmp_path / "twice.png")
    assert once.shape == twice.shape and np.array_equal(once, twice)

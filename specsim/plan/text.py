"""A plan as lines of text at a terminal's width: the decision first (`answer_lines`, what `specsim plan` prints),
then, asked for, everything behind it (`detail_lines`, `specsim plan --details`: every figure of the table, the
acceptance band, the simulated trials, the engine configs, the priors' sources).

Text is wrapped at spaces only (`wrap`): a word, an id or a number is never cut; one longer than the width stands
on its own line. Tables too wide for the width are printed as one block per row. Every figure is read from the
plan's record (`summary.plan_dict`), the one the JSON and the report show.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from typing import Any

import yaml

from specsim.plan.result import Plan
from specsim.plan.summary import config_text, pays_by_draft

#: the terminal width assumed where none is known (rich's and most terminals' default)
DEFAULT_WIDTH = 80
#: columns between two table columns
GAP = "  "
#: the narrowest a wrapped last column of a table may get before the table is printed as blocks
MIN_WRAPPED = 16


def wrap(text: str, width: int, first: str = "", rest: str = "") -> list[str]:
    """`text` in lines of at most `width` characters, broken at spaces only (a longer word, an id or a path,
    stands alone on its line); `first` / `rest` start the first / the other lines."""
    return textwrap.wrap(text, max(width, len(first) + 1, len(rest) + 1), initial_indent=first, subsequent_indent=rest,
                         break_long_words=False, break_on_hyphens=False) or [first.rstrip()]


def table_lines(header: Sequence[str], rows: Sequence[Sequence[str]], width: int, text: Sequence[str] = (),
                title: str = "") -> list[str]:
    """A plain table (columns two spaces apart, the first and the `text` columns left-aligned, the others
    right-aligned). Wider than `width`: a last text column is wrapped at spaces within what is left of the width;
    where that leaves too little, one block per row, a `column: value` line each (values wrapped at spaces)."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]
    out = [title] if title else []
    left = [i == 0 or h in text for i, h in enumerate(header)]
    room = width - sum(widths[:-1]) - len(GAP) * (len(widths) - 1)  # what the last column may take
    fits = room >= widths[-1]
    if fits or (left[-1] and room >= max(MIN_WRAPPED, len(str(header[-1])))):
        widths[-1] = min(widths[-1], room)

        def lines(cells: Sequence[str]) -> list[str]:
            last = wrap(str(cells[-1]), widths[-1]) if left[-1] else [str(cells[-1])]
            head = GAP.join(str(c).ljust(w) if left[i] else str(c).rjust(w)
                            for i, (c, w) in enumerate(zip(cells[:-1], widths, strict=False)))
            pad = " " * (len(head) + len(GAP))
            first = last[0].ljust(widths[-1]) if left[-1] else last[0].rjust(widths[-1])
            return [(head + GAP + first).rstrip(), *((pad + x).rstrip() for x in last[1:])]
        return [*out, *lines(header), *(x for r in rows for x in lines(r))]
    key = max(len(h) for h in header) + 2
    for i, row in enumerate(rows):
        if i:
            out.append("")
        for h, c in zip(header, row, strict=True):
            out += wrap(str(c), width, f"{h}:".ljust(key), " " * key)
    return out


def _num(x: float, digits: int) -> str:
    return f"{x:,.{digits}f}"


def bucket_table(data: dict[str, Any], width: int, full: bool = False) -> list[str]:
    """The plan's load points: the configuration run there and what it gives; `full`: the step's parts (the step,
    its draft and verify passes, plain decoding's step) and each point's share of the load."""
    header = ["bucket", "batch", "context", "tok/step", "speedup", "tok/s", "ms/token", "config"]  # config wraps
    if full:
        header = ["bucket", "batch", "context", "share", "step ms", "draft ms", "verify ms", "plain ms"]
    rows = []
    for r in data["buckets"]:
        row = {"bucket": r["bucket"], "share": _num(r["weight"], 3), "batch": str(r["batch"]),
               "context": _num(r["context"], 0), "config": config_text(r["k"], r.get("topk") or 1,
                                                                         r.get("num_draft_tokens")),
               "tok/step": _num(r["tokens_per_step"], 2), "step ms": _num(r["step_ms"], 2),
               "draft ms": _num(r["draft_ms"], 2), "verify ms": _num(r["verify_ms"], 2),
               "plain ms": _num(r["baseline_step_ms"], 2), "speedup": f"{r['speedup']:.2f}x",
               "tok/s": _num(r["throughput_tok_s"], 0), "ms/token": _num(r["ms_per_token"], 2)}
        rows.append([row[h] for h in header])
    return table_lines(header, rows, width, text=("config",))


def policy_text(plan: Plan) -> str:
    """The policy over batch in one sentence: 'policy for eagle3 over batch size: k = 5 at 1-45, k = 4 at 46-53,
    off at 54-512'."""
    parts = []
    for seg in plan.policy.schedule:
        span = f"{seg.batch_from}" if seg.batch_from == seg.batch_to else f"{seg.batch_from}-{seg.batch_to}"
        parts.append(f"{config_text(seg.k, seg.topk, seg.num_draft_tokens)} at {span}")
    return f"policy for {plan.draft_label} over batch size: " + ", ".join(parts)


def arrival_text(data: dict[str, Any]) -> str:
    """An arrival plan's same-rate comparison (prefill included), from the record's `arrival`."""
    a = data["arrival"]
    return (f"at {a['rate_rps']:.3g} requests/s, prefill included: {a['ms_per_token']:.2f} ms/token "
            f"({a['concurrency']:.1f} in flight) against {a['baseline_ms_per_token']:.2f} "
            f"({a['baseline_concurrency']:.1f} in flight) without speculation, {a['gain_same_rate']:.2f}x; the table "
            "is the decode step at the nearest batch")


def serving_text(data: dict[str, Any]) -> str:
    """The simulated choice's percentiles, from the record's `serving`."""
    sv = data["serving"]
    base = sv["baseline"]
    p = f"p{sv['slo']['percentile']:g}"
    return (f"by simulation at {sv['target_rate_rps']:g} requests/s ({sv['requests']:,} requests): {sv['replicas']} "
            f"replicas, {p} TTFT {sv['ttft_ms']:,.0f} ms, TPOT {sv['tpot_ms']:.1f} ms; without speculation "
            f"{base['replicas']} replicas, {p} TTFT {base['ttft_ms']:,.0f} ms, TPOT {base['tpot_ms']:.1f} ms "
            f"({len(sv['trials'])} simulations)")


def engines_text(data: dict[str, Any]) -> str:
    """Which engines got a configuration, and the note every one shares."""
    cfg = data["engine_configs"]
    names = [name for name, v in cfg.items() if isinstance(v, dict)]
    note = cfg.get("note") or ""
    if not names:
        return f"engine configs: {note}"
    return (f"engine configs for {', '.join(names)}: {note} (--details shows them, --engine-configs DIR writes "
            "them)")


def answer_lines(plan: Plan, data: dict[str, Any], width: int = DEFAULT_WIDTH) -> list[str]:
    """What `specsim plan` prints: the decision, the table, the policy and what to run, in about 30 lines."""
    out = [*wrap(data["recommendation"], width), ""]
    out += wrap(f"{data['scenario']}: {data['model']} on {data['tp']}x {data['hardware']} ({data['engine']}), "
                f"objective {data['objective']}", width)
    out += ["", *bucket_table(data, width), ""]
    if data["arrival"]:
        out += wrap(arrival_text(data), width)
    if plan.policy.schedule and plan.speculates:
        out += wrap(policy_text(plan), width)
    if data["serving"]:
        out += wrap(serving_text(data), width)
    if plan.pays:
        out += wrap("where each draft pays (contexts pooled over the load): " + "; ".join(
            f"{label}: {where}" for label, where in pays_by_draft(plan).items()), width)
    out += wrap(engines_text(data), width)
    for note in data["notes"]:
        out += wrap(note, width, "note: ", "  ")
    return out


def detail_lines(plan: Plan, data: dict[str, Any], width: int = DEFAULT_WIDTH) -> list[str]:
    """What `--details` adds: every step figure, the acceptance band, the simulated trials, each engine's
    configuration and the sources behind the answer, in full."""
    out = ["", *bucket_table(data, width, full=True)]
    band = data.get("acceptance_band")
    if band:
        rows = [[which, f"{case['gain']:.2f}x", case["method"]] for which, case in
                (("low", band["low"]), ("central", band["central"]), ("high", band["high"]))]
        out += ["", *table_lines(["acceptance", "gain of this policy", "optimiser's choice"], rows, width,
                                 ("optimiser's choice",))]
    sv = data.get("serving")
    if sv:
        p = f"p{sv['slo']['percentile']:g}"
        rows = [[t["draft"], str(t["replicas"]), "yes" if t["meets_slo"] else "no", f"{t['ttft_ms']:,.0f}",
                 f"{t['tpot_ms']:.1f}", t["policy"].replace(",", ", ")] for t in sv["trials"]]
        out += ["", *table_lines(["draft", "replicas", "meets", f"{p} TTFT ms", f"{p} TPOT ms", "policy"], rows,
                                 width, ("meets", "policy"), title="the simulations of the SLO search:")]
    for name, cfg in json.loads(json.dumps(data["engine_configs"], default=float)).items():  # plain, unshared values
        if isinstance(cfg, dict):
            out += ["", f"{name}:", *yaml_lines(cfg, width)]
    for note in data["details"]:
        out += ["", *wrap(note, width)]
    return out


def yaml_lines(cfg: object, width: int) -> list[str]:
    """An engine config as an indented YAML block within `width` (values never cut): PyYAML breaks a flow
    collection only after the item that crosses its width, so it is given room for one item; where even that
    overflows (a narrow terminal), every collection is written as a block, a key a line. A value longer than the
    width with no space in it stands on its own line."""
    lines: list[str] = []
    for flow, room in ((None, 32), (False, 4)):
        text = yaml.safe_dump(cfg, sort_keys=False, default_flow_style=flow, width=max(20, width - room),
                              allow_unicode=True)
        lines = ["  " + line for line in text.rstrip().splitlines()]
        if max(map(len, lines)) <= width:
            break
    return lines

"""The fleet command: the cheapest GPU type, layout, prefill/decode pools, draft and k that serve a scenario's
traffic mix at its arrival rate within its per-token SLO, searched over every combination (plan/fleet_search.py),
locally or on a cluster."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import typer

from specsim.cli._format import check_format, console, emit_records, markdown_table, parse_int_list, working
from specsim.cli._options import CostModel, Engine, Fmt, option, scenario_of
from specsim.cli.main import app
from specsim.errors import SpecsimError
from specsim.fields import FIELDS, METAVARS
from specsim.plan.fleet_price import FleetRow
from specsim.plan.fleet_search import AUTO_PD, BACKENDS, FleetAnswer, Space, check_backend, question, search
from specsim.plan.text import wrap

DEFAULT_TP = (1, 2, 4, 8)  # the layouts searched where --tp is not given (those the model takes)


def _axis(name: str, help: str) -> Any:
    """An axis of the search as a list option: the field's flags (specsim.fields), its own help and default."""
    from rich.markup import escape

    f = FIELDS[name]
    metavar = f.metavar or METAVARS[f.kind]
    return typer.Option(f.flag, *((f.short,) if f.short else ()), help=escape(help), metavar=f"{metavar},...",
                        show_default=False)


@app.command()
def fleet(
    scenario: Annotated[Path, typer.Argument(help="scenario YAML: the model, drafts, traffic mix (arrival rate, "
                                             "prompt and output tokens, workloads), slo_ms_per_token, "
                                             "gpu_hour_usd")],
    hardware: Annotated[str | None, _axis("hardware", "GPU profiles to search (a list; all: every "
                                           "bundled one; default: the scenario's)")] = None,
    tp: Annotated[str | None, _axis("tp", "tensor-parallel degrees (a list; default 1,2,4,8, those the "
                                     "model takes)")] = None,
    ep: Annotated[str | None, _axis("ep", "expert parallelism (a list; MoE models; default 1)")] = None,
    draft: Annotated[str | None, _axis("draft", "drafts (a list; default: the scenario's)")] = None,
    k: Annotated[str | None, _axis("k", "draft lengths (a list, e.g. 1-8; default 1 to the scenario's "
                                    "max_k); plain decoding is always priced")] = None,
    pd: Annotated[str | None, typer.Option("--pd", metavar="X:Y,...", help=(
        f"prefill:decode pool ratios searched beside aggregated replicas, e.g. 1:1,1:2,2:1 (or 1P2D; auto: "
        f"{AUTO_PD}), each the fewest replicas in that ratio that serve the rate, speculation on the decode pool "
        "(default: aggregated only)"), show_default=False)] = None,
    kv_link: Annotated[float | None, typer.Option("--kv-link", help=(
        "with --pd: KV transfer bandwidth per prefill GPU between the pools, GB/s (default 43.5: one 400 Gb/s NIC "
        "per GPU at Mooncake's measured 87% of line rate)"), show_default=False)] = None,
    rate: Annotated[str | None, option("rate", help="arrival rate to size for, requests/s (default: the "
                                       "scenario's serving.target_rate_rps, else its mean rate)")] = None,
    gpu_hour_usd: Annotated[str | None, typer.Option(
        "--gpu-hour-usd", metavar="USD", help="$ per GPU-hour: one price, or one per GPU type "
        "(h100-sxm=2.5,b200=5); default: the scenario's gpu_hour_usd; none: rank by GPUs")] = None,
    top: Annotated[int, typer.Option("--top", help="configurations to show (0: all)")] = 10,
    backend: Annotated[str, typer.Option("--backend", help=f"where the search runs: {' | '.join(BACKENDS)} "
                                         "(local processes; a Dask or Ray cluster)")] = "local",
    scheduler: Annotated[str | None, typer.Option(
        "--scheduler", metavar="ADDRESS", help="with --backend dask: the scheduler, tcp://HOST:PORT (default: "
        "DASK_SCHEDULER_ADDRESS, else a local cluster)")] = None,
    engine: Engine = None,
    cost_model: CostModel = None,
    fmt: Fmt = "table",
    details: Annotated[bool, typer.Option("--details", help="after the answer, each configuration's bands, what "
                                          "was left out and how the search ran (table format)")] = False,
) -> None:
    """The cheapest fleet for a traffic mix: every GPU type x layout x prefill/decode pools (--pd) x draft x k
    sized for the arrival rate within the per-token SLO, ranked by $ per million output tokens (by GPUs without
    prices)."""
    check_format(fmt)
    check_backend(backend, scheduler)
    if top < 0:
        raise SpecsimError(f"--top must be >= 0, got {top}")
    if details and fmt != "table":
        raise SpecsimError(f"--details is for the table format: --format {fmt} already holds every detail")
    s = scenario_of(scenario, cost_model, engine)
    ks = _ks(k, s.max_k)
    drafts = _drafts(draft, s)
    hw = _hardware(hardware, s.hardware.name)
    tps = _ints(tp, "tp", tuple(t for t in DEFAULT_TP if _takes(s, t)) or (s.tp,))
    pools = s.serving.pools if s.serving is not None else None  # the scenario's serving.pools unless the flags say
    if pools is not None and pd is None:
        pd = ",".join(f"{x}:{y}" for x, y in pools.pd)
        kv_link = pools.kv_link_gb_per_s if kv_link is None else kv_link
    space = Space((("hardware", tuple(hw)), ("tp", tps), ("ep", _ints(ep, "ep", (1,))), ("pd", _pd(pd, kv_link))))
    prices = _prices(gpu_hour_usd, hw, s.gpu_hour_usd)
    q = question(s, drafts, ks, None if rate is None else float(FIELDS["rate"].parse(rate)), prices, cost_model,
                 kv_link)
    with working(f"searching the fleet for {s.name}..."):
        ans = search(q, space, backend, scheduler)
    shown = list(ans.rows if top == 0 else ans.rows[:top])
    if fmt == "json":
        print(json.dumps(answer_dict(ans, q.rate_rps, q.slo_ms, shown), indent=2, default=_plain))
    elif fmt == "csv":
        emit_records([_record(r) for r in shown], "csv")
    elif fmt == "markdown":
        print("\n".join(_decision(ans, q.rate_rps, q.slo_ms, 10_000)) + "\n")
        print(markdown_table(COLUMNS, [_cells(i, r) for i, r in enumerate(shown, 1)], 0), end="")
    else:
        _print_table(ans, q.rate_rps, q.slo_ms, shown, details, len(hw) > 1 and prices is not None and
                     len(set(prices.values())) == 1)


def _takes(s: Any, tp: int) -> bool:
    try:
        s.model.check_tp(tp)
    except SpecsimError:
        return False
    return True


def _ints(text: str | None, name: str, default: tuple[int, ...]) -> tuple[int, ...]:
    """A list option of integers, each within its field's bounds (`default` where not given)."""
    if text is None:
        return default
    f = FIELDS[name]
    values = parse_int_list(text, f.flag)
    for v in values:
        f.check(v)
    return tuple(dict.fromkeys(values))


def _pd(text: str | None, kv_link: float | None) -> tuple[tuple[int, int] | None, ...]:
    """How the replicas serve: aggregated (None), then each prefill:decode ratio asked, in lowest terms (2:2 is
    1:1: the fewest replicas in the ratio are searched either way)."""
    from specsim.scenario.kv_cache import parse_pd

    if text is None:
        if kv_link is not None:
            raise SpecsimError("--kv-link is the KV link between prefill and decode pools: give it with --pd")
        return (None,)
    ratios = parse_pd(AUTO_PD if text.strip().lower() == "auto" else text)
    return (None, *dict.fromkeys((x // math.gcd(x, y), y // math.gcd(x, y)) for x, y in ratios))


def _ks(text: str | None, max_k: int) -> tuple[int, ...]:
    """The draft lengths searched (k = 0, plain decoding, is always priced and so dropped here)."""
    ks = _ints(text, "k", tuple(range(1, max_k + 1)))
    return tuple(x for x in ks if x > 0)


def _hardware(text: str | None, own: str) -> list[str]:
    """The GPU profiles searched, by their bundled names (an unknown one refused naming the nearest)."""
    from specsim.cost.hardware import available, hardware_name

    if text is None:
        return [own]
    names = [p.strip() for p in text.split(",")]
    if any(not n for n in names):
        raise SpecsimError(f"--hardware: empty item in {text!r} (a list: h100-sxm,h200 or all)")
    out: list[str] = []
    for n in names:
        out += available() if n.lower() == "all" else [hardware_name(n)]
    return list(dict.fromkeys(out))


def _drafts(text: str | None, s: Any) -> list[Any]:
    """The drafts searched: the scenario's (one named by its label or method), else made for its model."""
    from specsim.drafts.build import make_draft

    if text is None:
        return list(s.drafts)
    out = []
    for name in (p.strip() for p in text.split(",")):
        if not name:
            raise SpecsimError(f"--draft: empty item in {text!r} (a list: eagle3,ngram)")
        own = [d for d in s.drafts if name in (d.label, d.method, d.name)]
        out.append(own[0] if own else make_draft(name, s.model, "--draft", s.raw.get("task"),
                                                 s.raw.get("temperature")))
    return list({d.label: d for d in out}.values())


def _prices(text: str | None, hardware: list[str], scenario: float | None) -> dict[str, float] | None:
    """$ per GPU-hour by GPU type: one price for all, or NAME=USD for every GPU searched."""
    from specsim.cost.hardware import hardware_name
    from specsim.fields import parse_float

    if text is None:
        return None if scenario is None else dict.fromkeys(hardware, float(scenario))
    if "=" not in text:
        usd = parse_float(text, "--gpu-hour-usd")
        if usd <= 0:
            raise SpecsimError(f"--gpu-hour-usd must be > 0, got {text}")
        return dict.fromkeys(hardware, usd)
    prices: dict[str, float] = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        usd = parse_float(value, f"--gpu-hour-usd {name.strip()}")
        if usd <= 0:
            raise SpecsimError(f"--gpu-hour-usd {name.strip()} must be > 0, got {value}")
        prices[hardware_name(name.strip())] = usd
    missing = [h for h in hardware if h not in prices]
    if missing:
        raise SpecsimError(f"--gpu-hour-usd: no price for {missing[0]} (give NAME=USD for every GPU searched)")
    return {h: prices[h] for h in hardware}


COLUMNS = ["#", "GPUs", "band", "hardware", "tp", "layout", "draft", "k", "req/s", "speedup", "$/Mtok"]


def _num(x: float | None, digits: int = 3) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.{digits}g}"


def _gpus(x: float) -> str:
    return f"{x:g}" if math.isfinite(x) else "-"


def _cells(i: int, r: FleetRow) -> list[str]:
    band = "-" if not r.ok else _gpus(r.gpus) if r.gpus_low == r.gpus_high else \
        f"{_gpus(r.gpus_low)}-{_gpus(r.gpus_high)}"
    par = f"{r.tp}" + (f" ep {r.ep}" if r.ep > 1 else "")
    usd = "-" if r.usd_per_mtok is None else f"{r.usd_per_mtok:.3f}"
    return [str(i), _gpus(r.gpus), band, r.hardware, par, r.layout, r.draft, str(r.k), _num(r.capacity_rps),
            "-" if r.speedup is None else f"{r.speedup:.2f}", usd]


def _record(r: FleetRow) -> dict[str, Any]:
    from dataclasses import asdict

    return {key: _plain(v) for key, v in asdict(r).items()}


def _plain(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


def _best_text(r: FleetRow) -> str:
    spec = "plain decoding" if r.draft == "none" else f"{r.draft} at k {r.k}"
    usd = "" if r.usd_per_mtok is None else f", ${r.usd_per_mtok:.3f} per million output tokens"
    band = "" if r.gpus_low == r.gpus_high else f" (80% band {_gpus(r.gpus_low)}-{_gpus(r.gpus_high)} GPUs)"
    lay = f"tp {r.tp}" + (f", ep {r.ep}" if r.ep > 1 else "")
    if r.prefill_replicas is not None and r.decode_replicas is not None:
        return (f"{r.layout} pools, {_gpus(r.prefill_replicas)} prefill + {_gpus(r.decode_replicas)} decode "
                f"replicas of {r.gpus_per_replica}x {r.hardware} ({lay}), the decode pool running {spec}: "
                f"{_gpus(r.gpus)} GPUs{usd}{band}")
    return (f"{_gpus(r.replicas)} replica{'s' if r.replicas != 1 else ''} of {r.gpus_per_replica}x {r.hardware} "
            f"({lay}) running {spec}: {_gpus(r.gpus)} GPUs{usd}{band}")


def _decision(ans: FleetAnswer, rate: float, slo: float, width: int) -> list[str]:
    """The answer first (wrapped to `width`), then one line on the search."""
    best = ans.best
    head = (f"Cheapest fleet for {rate:g} requests/s within {slo:g} ms/token (mean): {_best_text(best)}."
            if best is not None else f"No configuration searched serves {rate:g} requests/s within {slo:g} "
            "ms/token (mean): raise the SLO, search larger tp or other GPUs.")
    ran = (f"Searched {ans.configurations:,} configurations in {ans.seconds:.1f} s ({ans.per_second:,.0f}/s, "
           f"{ans.backend}, {ans.tasks} task{'s' if ans.tasks > 1 else ''}).")
    return [*wrap(head, width), *wrap(ran, width)]


def answer_dict(ans: FleetAnswer, rate: float, slo: float, shown: list[FleetRow]) -> dict[str, Any]:
    """The JSON answer: the decision, the search, the shown configurations."""
    best = ans.best
    return {"rate_rps": rate, "slo_ms_per_token": slo, "objective": ans.objective,
            "best": None if best is None else _record(best), "configurations": ans.configurations,
            "served": sum(r.ok for r in ans.rows), "seconds": ans.seconds, "configurations_per_s": ans.per_second,
            "backend": ans.backend, "tasks": ans.tasks, "skipped": list(ans.skipped),
            "rows": [_record(r) for r in shown]}


def _print_table(ans: FleetAnswer, rate: float, slo: float, shown: list[FleetRow], details: bool,
                 one_price: bool) -> None:
    from specsim.cli._format import print_rows_table

    con = console()
    head = _decision(ans, rate, slo, con.width)
    for i, line in enumerate(head):
        con.print(line, markup=False, highlight=False, soft_wrap=True, style="bold" if i < len(head) - 1 else None)
    con.print()
    print_rows_table("", COLUMNS, [_cells(i, r) for i, r in enumerate(shown, 1)], 0)
    notes = [f"{sum(not r.ok for r in ans.rows):,} of {ans.configurations:,} configurations serve nothing within "
             "the SLO (memory or latency)."] if any(not r.ok for r in ans.rows) else []
    split = next((r for r in ans.rows if r.ok and r.decode_replicas is not None), None)
    if split is not None and split not in shown[:1]:
        notes.append(f"Cheapest prefill/decode pools: {_best_text(split)}.")
    if one_price:
        notes.append("One price for every GPU type: give --gpu-hour-usd per type (h100-sxm=2.5,b200=5) to "
                     "compare them by cost, not by GPUs.")
    if details:
        notes += _detail_lines(ans, shown)
    else:
        notes.append("--details: each configuration's bands, what was left out, how the search ran")
    for line in notes:
        for part in wrap(line, con.width):
            con.print(part, markup=False, highlight=False, soft_wrap=True)


def _detail_lines(ans: FleetAnswer, shown: list[FleetRow]) -> list[str]:
    out = ["", "Each configuration's 80% band (the acceptance prior's low and high ends):"]
    for i, r in enumerate(shown, 1):
        out.append(f"{i}. req/s per replica {_num(r.capacity_low_rps)}-{_num(r.capacity_high_rps)}, speedup "
                   f"{_num(r.speedup_low)}-{_num(r.speedup_high)}, GPUs {_gpus(r.gpus_low)}-{_gpus(r.gpus_high)}, "
                   f"{r.concurrency:.0f} requests in flight per {'decode ' if r.decode_replicas is not None else ''}"
                   f"replica at capacity, TTFT {_num(r.ttft_ms)} ms unqueued"
                   + (" (prefill + KV transfer)" if r.decode_replicas is not None else ""))
    out += [f"left out: {line}" for line in ans.skipped]
    out.append(f"ranked by {'$ per million output tokens' if ans.objective == 'usd' else 'GPUs'}, then GPUs, then "
               "the most requests/s per replica; capacity by the planner's Little's-law model (prefill included); "
               "xPyD pools: min(x x 0.9 / prefill, y x the decode replica's rate, prefill excluded) per x:y group, "
               "req/s per replica of the group")
    return out

"""The report's header (the recommendation first) and the plan section: `specsim plan --format markdown`,
the policy over batch, the arrival-rate solution and the engine configuration."""

from __future__ import annotations

import json
from typing import Any

from specsim.drafts.draft import Draft
from specsim.plan.summary import NAMES, plan_markdown
from specsim.report.context import Ctx, Section, md_table


def _describe_draft(d: Draft) -> str:
    name = NAMES.get(d.method, d.method)
    if d.model is not None:
        name += f" ({d.model.name}{f', tp {d.draft_tp}' if d.draft_tp else ''})"
    return f"{d.label}: {name}; acceptance {d.acceptance.source}"


def _describe_load(c: Ctx) -> str:
    s = c.s
    if s.arrival is not None:
        a = s.arrival
        return (f"{a.rate_rps:g} requests/s, {a.prompt_tokens:,}-token prompts, {a.output_tokens:,}-token outputs "
                "(concurrency by Little's law)")
    parts = []
    for b in s.buckets:
        ctxs = ", ".join(f"{cc:,} ({w:.0%})" if len(b.contexts) > 1 else f"{cc:,}" for cc, w in b.contexts)
        parts.append(f"{b.name}: {b.weight * 24:.1f} h at batch {b.batch}, context {ctxs}")
    return "; ".join(parts)


def header(c: Ctx) -> str:
    s, d = c.s, c.data
    lines = [f"# Speculative decoding plan: {s.name}", ""]
    if s.description:
        lines += [s.description, ""]
    lines += [f"> **Recommendation:** {d['recommendation']}", ""]
    slo = f", SLO {s.slo_ms_per_token:g} ms/token" if s.slo_ms_per_token else ""
    lines += [
        f"- **Target:** {s.model.name} on {s.tp}x {s.hardware.name}, weights {s.weight_dtype}, KV cache "
        f"{s.kv_dtype}, {s.memory_utilization:.0%} of GPU memory usable",
        f"- **Objective:** {s.objective}{slo}; k up to {s.max_k}",
        "- **Drafts considered:** " + "; ".join(_describe_draft(x) for x in s.drafts),
        f"- **Load:** {_describe_load(c)}",
        "- **Price:** " + (f"${s.gpu_hour_usd:g} per GPU-hour" if s.gpu_hour_usd is not None
                           else "not given (no dollar figures)"),
        "",
    ]
    return "\n".join(lines)


def plan_section(c: Ctx) -> Section:
    d = c.data
    body = [plan_markdown(c.plan).rstrip(), ""]
    if d["policy"] and c.s.arrival is None:
        rows = [[seg["batch_from"], seg["batch_to"],
                 "does not fit" if seg["k"] < 0 else ("off" if seg["k"] == 0 else seg["k"]),
                 (f"tree {seg['topk']} x {seg['num_draft_tokens']}" if (seg.get("topk") or 1) > 1
                  and seg.get("num_draft_tokens") else "chain") if seg["k"] > 0 else "-"] for seg in d["policy"]]
        body += [f"Policy for {d['draft']} over batch size (k never rises with load, as engines schedule it; a tree "
                 "is topk x draft nodes verified, k its depth):", "",
                 md_table(["batch from", "batch to", "k", "shape"], rows, "rrrl"), ""]
    if d["arrival"]:
        a = d["arrival"]
        body += [f"At {a['rate_rps']:g} requests/s: {a['concurrency']:.1f} sequences in flight with speculation "
                 f"({a['ms_per_token']:.2f} ms/token), {a['baseline_concurrency']:.1f} without "
                 f"({a['baseline_ms_per_token']:.2f} ms/token).", ""]
    body += engine_config_blocks(d["engine_configs"])
    return Section("The plan", "\n".join(body), files=engine_config_files(d["engine_configs"]))


ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}
ENGINE_CONFIG_DIR = "engine-configs"
JSON_WIDTH = 100


def pretty_json(value: Any, width: int = JSON_WIDTH) -> str:
    """JSON for people: a mapping or list that fits in `width` characters stays on one line, a longer one
    puts each entry on its own indented line, and a long list of numbers or strings is packed several to a
    line (a `speculative_token_tree`, a `batch_stats` row). Valid JSON: `json.loads` gives `value` back."""
    return _pretty(value, 0, width, width)


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _flat(v: list[Any]) -> bool:
    """A short list of scalars (a [from, to, k] row)."""
    return all(not isinstance(x, dict | list) for x in v) and len(json.dumps(v, default=float)) <= 40


def _pretty(value: Any, indent: int, room: int, width: int, row: bool = False) -> str:
    """`value` at `indent`, on one line when it fits in `room`; `row`: an element of a list (a table row)."""
    flat = json.dumps(value, default=float, ensure_ascii=False)
    if len(flat) <= room or not isinstance(value, dict | list) or not value:
        return flat
    inner = indent + 2
    pad = " " * inner
    # packed several to a line: a list of numbers, strings or short flat lists, a table row, a row of numbers;
    # one entry per line: a mapping of settings (the engine's flags)
    packed = (all(not isinstance(v, dict) and (not isinstance(v, list) or _flat(v)) for v in value)
              if isinstance(value, list) else
              all(not isinstance(v, dict | list) for v in value.values())
              and (row or all(_number(v) for v in value.values())))
    if packed:
        items = ([f"{json.dumps(str(k), ensure_ascii=False)}: {json.dumps(v, default=float, ensure_ascii=False)}"
                  for k, v in value.items()] if isinstance(value, dict) else
                 [json.dumps(v, default=float, ensure_ascii=False) for v in value])
        lines: list[str] = []
        line = ""
        for item in items:
            if line and len(line) + 2 + len(item) > width - inner - 1:
                lines.append(line + ",")
                line = item
            else:
                line = f"{line}, {item}" if line else item
        lines.append(line)
        body = "\n".join(pad + x for x in lines)
    elif isinstance(value, dict):
        parts = []
        for k, v in value.items():
            key = json.dumps(str(k), ensure_ascii=False) + ": "
            parts.append(pad + key + _pretty(v, inner, width - inner - len(key) - 1, width))
        body = ",\n".join(parts)
    else:
        body = ",\n".join(pad + _pretty(v, inner, width - inner - 1, width, row=True) for v in value)
    opening, closing = "{}" if isinstance(value, dict) else "[]"
    return f"{opening}\n{body}\n{' ' * indent}{closing}"


def _engines(configs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: cfg for name, cfg in configs.items() if isinstance(cfg, dict)}


def engine_config_files(configs: dict[str, Any]) -> dict[str, str]:
    """Each engine's configuration as a file beside the report: engine-configs/ENGINE.json."""
    return {f"{ENGINE_CONFIG_DIR}/{name}.json": pretty_json(cfg) + "\n" for name, cfg in _engines(configs).items()}


def engine_config_blocks(configs: dict[str, Any]) -> list[str]:
    """Markdown: one heading and one indented JSON block per engine, each linked to its file."""
    engines = _engines(configs)
    if not engines:
        return []
    out = ["### Engine configuration", "",
           "Settings for each engine that put the plan into practice; each block is also a file beside this "
           f"report (`{ENGINE_CONFIG_DIR}/`).", ""]
    notes = [str(v) for v in configs.values() if isinstance(v, str)]
    if notes:
        out += ["Note: " + "; ".join(notes) + ".", ""]
    for name, cfg in engines.items():
        path = f"{ENGINE_CONFIG_DIR}/{name}.json"
        out += [f"#### {ENGINE_NAMES.get(name, name)}", "", f"Download: [{path}]({path})", "", "```json",
                pretty_json(cfg), "```", ""]
    return out

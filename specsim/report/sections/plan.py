"""The report's header (the recommendation first) and the plan section: `specsim plan --format markdown`,
the policy over batch, the arrival-rate solution and the engine configuration."""

from __future__ import annotations

from specsim.drafts.draft import Draft
from specsim.engines.configs.layout import ENGINE_CONFIG_DIR, engine_config_files, pretty_json
from specsim.plan.summary import NAMES, plan_markdown
from specsim.records import Json
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
        f"- **Target:** {s.model.name} on {s.where}, weights {s.weight_dtype}, KV cache "
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
    band = c.plan.band
    fig = None
    if band is not None:
        from specsim.report.figures.choice import choice_against_acceptance

        fig = choice_against_acceptance(band, band.central.draft, f"{c.title}: the choice against acceptance")
    after = "\n".join(engine_config_blocks(d["engine_configs"]))
    caption = ("the chosen policy's gain and the best choice at the acceptance band's ends; a vertical line marks "
               "the tokens per step that would change the decision")
    if fig is None:
        return Section("The plan", "\n".join([*body, after]), files=engine_config_files(d["engine_configs"]))
    return Section("The plan", "\n".join(body), fig, "choice", caption, after,
                   files=engine_config_files(d["engine_configs"]))


ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM", "atom": "ATOM"}


def _engines(configs: dict[str, Json]) -> dict[str, dict[str, Json]]:
    """The engines that got a configuration (the others are None; the note is text)."""
    return {name: cfg for name, cfg in configs.items() if isinstance(cfg, dict)}


def engine_config_blocks(configs: dict[str, Json]) -> list[str]:
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

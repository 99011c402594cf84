"""`simulate`'s flags as a scenario: each field given on the command line written to its place in a scenario's
mapping (`specsim.fields.FIELDS[...].scenario`), before the mapping is parsed as a file is. A flag therefore means
exactly what its scenario field means, and `simulate FLAGS` answers as `simulate FILE` with those fields does.

Without a file the flags make the whole scenario (`benchmark`: a benchmark client's question: closed-loop clients,
fixed or random lengths); with one, a flag overrides the file's field. A draft's own settings (topk, window,
checkpoint, a measured acceptance length, ...) apply to the draft simulated: `--draft`'s, or a file's only draft.
"""

from __future__ import annotations

import copy
from typing import Any

from specsim.errors import SpecsimError
from specsim.fields import FIELDS, Given
from specsim.scenario.lengths import RANGE_CLIENTS

#: flags that set a draft's own fields (its `scenario` path is drafts[].X)
DRAFT_FIELDS = tuple(name for name, f in FIELDS.items() if f.scenario.startswith("drafts[]."))
#: the lengths a benchmark client sends: fixed, or drawn as the client draws them about the given length
LENGTH_FIELDS = ("input_len", "output_len", "range_ratio", "client")
#: a scenario's top-level fields a flag of the same name sets
TOP = tuple(name for name, f in FIELDS.items() if "simulate" in f.doors and f.scenario == name)


def _lengths(tokens: int, g: Given, client: str) -> dict[str, Any]:
    if not g.given("range_ratio"):
        return {"dist": "fixed", "tokens": int(tokens)}
    return {"dist": "random", "tokens": int(tokens), "range_ratio": float(g["range_ratio"]),
            "client": client if client in RANGE_CLIENTS else "vllm"}


def _drafts(data: dict[str, Any], g: Given, every: bool) -> list[dict[str, Any]]:
    """The draft mappings the draft flags apply to: `every` draft (the flags made them), or a file's draft that
    --draft names (its label), or its only one."""
    drafts = [d if isinstance(d, dict) else {"method": d} for d in data.get("drafts") or []]
    data["drafts"] = drafts
    if every:
        return [d for d in drafts if d.get("method") != "none"]
    if not g.given("draft"):
        return drafts if len(drafts) == 1 else _one(drafts, g)
    return [d for d in drafts if d.get("name", d.get("method")) == g["draft"]] or _one(drafts, g)


def _one(drafts: list[dict[str, Any]], g: Given) -> list[dict[str, Any]]:
    given = next(n for n in (*DRAFT_FIELDS, "draft") if g.given(n))
    names = ", ".join(str(d.get("name", d.get("method"))) for d in drafts)
    raise SpecsimError(f"{FIELDS[given].flag}: the scenario has drafts {names}: say which with --draft")


def _speculation(g: Given) -> Any:
    """serving.speculation from --policy, else -k (with --acceptance-length and --policy, -k is the draft length
    the acceptance was measured at; without it, one of the two)."""
    if g.given("k") and g.given("policy") and not g.given("acceptance_length"):
        raise SpecsimError("give -k (a static draft length) or --policy, not both")
    if g.given("policy"):
        return str(g["policy"])
    return {"k": int(g["k"])} if int(g["k"]) else "off"


def _acceptance(d: dict[str, Any], g: Given) -> None:
    if not g.given("k"):
        raise SpecsimError("--acceptance-length is measured at a draft length: give -k too")
    if float(g["acceptance_length"]) > int(g["k"]) + 1:
        raise SpecsimError(f"--acceptance-length {g['acceptance_length']:g} exceeds k + 1 = {int(g['k']) + 1} (tokens "
                           "per step, the bonus token included)")
    d["acceptance"] = {"acceptance_length": float(g["acceptance_length"]), "k": int(g["k"])}


def override(data: dict[str, Any], g: Given, client: str, every_draft: bool = False) -> dict[str, Any]:
    """`data` (a copy) with every simulate field `g` holds as typed written to its scenario place; `client` the
    benchmark client whose random lengths a range ratio draws; `every_draft`: the draft fields set every draft
    (the flags named them), else the one --draft names. The run's size (--rate, --requests, --duration, --seed)
    is the simulation's to apply (advise/traffic.with_size: a rate curve keeps its shape at that mean)."""
    lengths = [FIELDS[n].flag for n in ("input_len", "output_len", "range_ratio") if g.given(n)]
    if g.given("agent") and lengths:
        raise SpecsimError(f"{lengths[0]}: --agent draws the lengths from its profile; give one or the other")
    out = copy.deepcopy(data)
    for name in TOP:
        if g.given(name):
            out[name] = g[name]
    if any(g.given(n) for n in DRAFT_FIELDS):
        for d in _drafts(out, g, every_draft):
            for name in DRAFT_FIELDS:
                if g.given(name) and name != "acceptance_length":
                    d[FIELDS[name].scenario.removeprefix("drafts[].")] = g[name]
            if g.given("acceptance_length"):
                _acceptance(d, g)
    _serving(out, g)
    _traffic(out, g, client)
    for name in PATH_FIELDS:  # written as they are, at their dotted place
        if g.given(name):
            _put(out, FIELDS[name].scenario, g[name])
    if g.given("agent") and isinstance(out.get("traffic"), dict):  # the profile draws the file's lengths
        for key in ("prompt", "output"):
            out["traffic"].pop(key, None)
    return out


#: fields a flag writes at their scenario place as given (the prefix cache, sessions, the KV tiers)
PATH_FIELDS = ("cached_fraction", "turns", "turn_input_len", "think", "agent", "kv_block", "kv_offload", "host_bw")


def _put(out: dict[str, Any], path: str, value: Any) -> None:
    *parents, key = path.split(".")
    node = out
    for p in parents:
        nxt = node.setdefault(p, {})
        if not isinstance(nxt, dict):
            raise SpecsimError(f"the scenario's '{p}' is not a section; {path} cannot be set in it")
        node = nxt
    node[key] = value


def _serving(out: dict[str, Any], g: Given) -> None:
    """The serving section's fields the flags set (speculation, the engine's limit, the rate to size for)."""
    if not any(g.given(n) for n in ("k", "policy", "max_num_seqs", "target_rate")):
        return
    serving: dict[str, Any] = out.setdefault("serving", {})
    if g.given("k") or g.given("policy"):
        serving["speculation"] = _speculation(g)
    for name, key in (("max_num_seqs", "max_num_seqs"), ("target_rate", "target_rate_rps")):
        if g.given(name):
            serving[key] = g[name]


def _traffic(out: dict[str, Any], g: Given, client: str) -> None:
    """The traffic section's fields the flags set: the lengths, and the arrival process."""
    t = out.get("traffic")
    if not isinstance(t, dict):
        if any(g.given(n) for n in (*LENGTH_FIELDS, "arrivals", "cv")):
            raise SpecsimError("the scenario has no traffic section for --input-len, --arrivals, ... to set")
        return
    for key, name in (("prompt", "input_len"), ("output", "output_len")):
        if g.given(name) or g.given("range_ratio"):
            t[key] = _lengths(g[name] if g.given(name) else _tokens(t.get(key), name), g, client)
        elif g.given("client") and isinstance(t.get(key), dict) and t[key].get("dist") == "random":
            t[key] = {**t[key], "client": client}
    if g.given("arrivals") or g.given("cv"):
        if not g.given("rate"):
            raise SpecsimError("--arrivals and --cv shape the arrivals at --rate: give --rate too")
        arrivals: dict[str, Any] = {"process": str(g["arrivals"]), "rate_rps": float(g["rate"])}
        if g.given("cv"):
            arrivals["cv"] = float(g["cv"])
        t["arrivals"] = arrivals


def _tokens(dist: Any, name: str) -> int:
    """The length a distribution is about, for --range-ratio to draw around (a fixed or random one's tokens)."""
    if isinstance(dist, dict) and isinstance(dist.get("tokens"), int):
        return int(dist["tokens"])
    raise SpecsimError(f"--range-ratio: the scenario's lengths are not about one length; give {FIELDS[name].flag}")

"""The README's fast figures (seconds): `cat` (the listings, the corpora, the examples and the configuration
vocabulary) and `pub` (`specsim validate --published`). tools/readme_figures.py puts them in place."""

from __future__ import annotations

import csv
import re
import sys
import tomllib
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from tools.readme_common import ROOT, Figures, SourceError, cell, count, escape, num, span, specsim_json, word

#: the order the README names the engines in; any other the tool lists follows, by name
ENGINE_ORDER = ("vllm", "sglang", "trtllm", "atom", "hf", "hf-naive", "gpt-fast")
VERSIONED = re.compile(r"-\d+(\.\d+)*$")
#: scenario fields whose default the README's scenario example states (`# ... (default X)`)
DEFAULTS_SHOWN = ("tp", "weight_dtype", "kv_dtype", "engine", "memory_utilization")


def _data(package: str, name: str) -> Path:
    return Path(str(resources.files(package) / "data" / name))


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def _engines(names: Sequence[str]) -> tuple[str, list[str]]:
    """("vllm, sglang, ... (+ 2 fitted older versions)", the versioned names)."""
    base = [n for n in names if not VERSIONED.search(n)]
    ordered = [n for n in ENGINE_ORDER if n in base] + sorted(n for n in base if n not in ENGINE_ORDER)
    versioned = sorted((n for n in names if VERSIONED.search(n)),
                       key=lambda n: (ordered.index(VERSIONED.sub("", n)) if VERSIONED.sub("", n) in ordered
                                      else len(ordered), n))
    extra = f" (+ {len(versioned)} fitted older versions)" if versioned else ""
    return ", ".join(ordered) + extra, versioned


def listings(f: Figures) -> None:
    """What `specsim hardware|models|engines list -f json` list."""
    with ThreadPoolExecutor(3) as pool:
        gpus, models, engines = pool.map(lambda what: specsim_json(what, "list"), ("hardware", "models", "engines"))
    f["cat.gpus"] = count(len(gpus))
    f["cat.models"] = count(len(models))
    phrase, versioned = _engines([e["name"] for e in engines])
    f["cat.engines"] = phrase
    f["cat.engine_versions"] = ", ".join(f"`{n}`" for n in versioned)


def corpora(f: Figures) -> None:
    """The bundled corpora: published speedups, serving runs, acceptance priors, bad inputs, examples."""
    pub = _csv_rows(_data("specsim.validation", "published.csv"))
    f["cat.published_rows"] = count(len(pub))
    f["cat.published_groups"] = count(len({r["group"] for r in pub}))
    f["cat.published_sources"] = count(len({r["source"] for r in pub}))
    serving = _csv_rows(_data("specsim.validation", "serving.csv"))
    f["cat.serving_rows"] = count(len(serving))
    f["cat.serving_groups"] = count(len({r["group"] for r in serving}))
    with open(_data("specsim.acceptance", "priors.yaml"), encoding="utf-8") as fh:
        priors = yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    f["cat.priors"] = count(sum("derived" not in e for e in priors))  # derived: computed from other entries
    f["cat.measurements_rows"] = count(len(_csv_rows(ROOT / "examples" / "measurements.csv")))
    f["cat.grid_rows"] = word(len(_csv_rows(ROOT / "examples" / "grid.csv")))
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.corpus.cases import all_cases

    f["cat.corpus_cases"] = count(len(all_cases()))
    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    f["cat.python"] = spec.removeprefix(">=").strip()


def _default(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _meaning(fld: Any) -> str:
    text = fld.help
    if fld.unit:
        text += f"; in {fld.unit}"
    if fld.default is not None and "default" not in fld.help:
        text += f"; default `{_default(fld.default)}`"
    return escape(text)


def vocabulary(f: Figures) -> None:
    """The question's fields (specsim/fields.py: FIELDS), one row each, and the scenario defaults shown."""
    from specsim.fields import DOORS, FIELDS

    rows = ["| field | flag | grid column / scenario key | " + " | ".join(DOORS) + " | meaning |",
            "|---|---|---|" + "---|" * len(DOORS) + "---|"]
    for fld in FIELDS.values():
        flag = f"`{fld.flag}`" + (f", `{fld.short}`" if fld.short else "")
        if fld.old:
            flag += " (also " + ", ".join(f"`--{o.replace('_', '-')}`" for o in fld.old) + ")"
        grid = f"`{fld.name}`" if "evaluate" in fld.doors else "—"
        where = grid if fld.scenario == fld.name else f"{grid} / `{fld.scenario}`" if fld.scenario else f"{grid} / —"
        marks = " | ".join("✓" if d in fld.doors else "" for d in DOORS)
        rows.append(f"| `{fld.name}` | {flag} | {where} | {marks} | {_meaning(fld)} |")
    f["cat.fields"] = "\n".join(rows)
    for name in DEFAULTS_SHOWN:
        f[f"cat.default.{name}"] = _default(FIELDS[name].default)


def catalogue() -> Figures:
    f = Figures()
    listings(f)
    corpora(f)
    vocabulary(f)
    return f


# -- validate --published ---------------------------------------------------------------------------------------

def published_table(data: Mapping[str, Any]) -> str:
    """The README's accuracy table: per source group, both modes side by side, then the overall row."""
    by: dict[str, dict[str, dict[str, Any]]] = {}
    meta: dict[str, dict[str, Any]] = {}
    for g in data["groups"]:
        if g["n"]:
            by.setdefault(g["group"], {})[g["mode"]] = g
            meta[g["group"]] = g

    def c(g: Mapping[str, Any] | None) -> str:
        return cell(g["n"], g["median_abs_error"], g["median_bias"]) if g else "—"

    lines = ["| group | role | hardware | measured acceptance: n, median \\|error\\| / bias "
             "| priors: n, median \\|error\\| / bias |", "|---|---|---|---|---|"]
    for name in sorted(by, key=lambda n: (meta[n]["role"] != "fit", n)):
        g = meta[name]
        role = "fit (in-sample)" if g["role"] == "fit" else "check (held out)"
        hw = "stated" if g["hardware_stated"] else "not stated"
        lines.append(f"| {name} | {role} | {hw} | {c(by[name].get('measured'))} | {c(by[name].get('priors'))} |")
    o = data["overall"]
    lines.append(f"| **overall (hardware stated)** | all | stated | **{c(o['measured'])}** | **{c(o['priors'])}** |")
    return "\n".join(lines)


def _group(data: Mapping[str, Any], name: str, mode: str) -> dict[str, Any]:
    for g in data["groups"]:
        if g["group"] == name and g["mode"] == mode and g["n"]:
            return dict(g)
    raise SourceError(f"validate --published: no {mode} rows for group {name!r} (the README names it)")


def _sweep(data: Mapping[str, Any], group: str, test: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    for s in data["crossovers"]:
        if s["group"] == group and test(s):
            return dict(s)
    raise SourceError(f"validate --published: no crossover sweep of {group!r} as the README describes")


def crossovers(f: Figures, data: Mapping[str, Any]) -> None:
    """EAGLE-1's published and predicted (priors) crossover batches in EAGLE-3's Tables 3 and 5; EAGLE-3's."""
    for key, group in (("sglang", "eagle3-sglang-h100"), ("rtx3090", "eagle3-vllm-rtx3090")):
        e1 = _sweep(data, group, lambda s: " eagle k=" in s["sweep"] and s["published"] is not None)
        f[f"pub.xover.{key}.published"] = str(e1["published"])
        f[f"pub.xover.{key}.predicted"] = str(e1["priors"])
        f.claim(e1["priors"] is not None, f"{group}: EAGLE-1 no longer stops paying in the prediction: reword")
    ends = []
    for group in ("eagle3-sglang-h100", "eagle3-vllm-rtx3090"):
        e3 = _sweep(data, group, lambda s: " eagle3 k=" in s["sweep"])
        ends.append(str(max(e3["batches"])))
        f.claim(e3["published"] is None and e3["priors"] is None,
                f"{group}: the README says EAGLE-3 never stops paying, as published; the tool now says "
                f"published {e3['published']}, predicted {e3['priors']}: reword")
    f["pub.xover.eagle3_batches"] = " / ".join(ends)


def still_off(f: Figures, data: Mapping[str, Any]) -> None:
    """The figures of "What is still off" and the SpecBundle paragraph, each read from its group."""
    paper_m, paper_p = _group(data, "eagle3-paper", "measured"), _group(data, "eagle3-paper", "priors")
    f["pub.eagle3_paper.measured_bias"] = num(100 * paper_m["median_bias"], 0)
    f["pub.eagle3_paper.priors_bias"] = num(100 * paper_p["median_bias"], 0)
    f.claim(paper_m["median_bias"] > 0 and paper_p["median_bias"] > 0, "eagle3-paper is no longer optimistic: reword")
    rtx = [g["median_bias"] for g in data["groups"] if "rtx3090" in g["group"] and g["mode"] == "priors" and g["n"]]
    f["pub.rtx3090.priors_bias"] = span([100 * b for b in rtx])
    f.claim(all(b > 0 for b in rtx), "an RTX 3090 group is no longer optimistic: reword")
    amd = [_group(data, g, "priors")["median_bias"] for g in ("amd-sglang-mi300x-dsv3-mtp", "vllm-amd-mi355x-eagle3")]
    f["pub.amd.mi300x_bias"], f["pub.amd.mi355x_bias"] = (num(-100 * b, 0) for b in amd)
    f.claim(all(b < 0 for b in amd), "an AMD group no longer predicts too little speedup: reword")
    dsr1 = _group(data, "trtllm-dsr1-mtp-b200", "measured")
    f["pub.trtllm_dsr1.measured"] = cell(dsr1["n"], dsr1["median_abs_error"], dsr1["median_bias"]).split(": ", 1)[1]
    bundle_m, bundle_p = (_group(data, "specbundle-sglang-h200", m) for m in ("measured", "priors"))
    f["pub.specbundle.n"] = str(bundle_m["n"])
    f["pub.specbundle.measured"] = cell(1, bundle_m["median_abs_error"], bundle_m["median_bias"]).split(": ", 1)[1]
    f["pub.specbundle.priors_bias"] = num(100 * bundle_p["median_bias"], 0)
    f.claim(bundle_p["median_bias"] > 0, "specbundle-sglang-h200 from priors is no longer optimistic: reword")


def bands(f: Figures, data: Mapping[str, Any]) -> None:
    """How often the speedup's 80% band held (each group left out of the spreads' fit), per mode."""
    for mode in ("measured", "priors"):
        o = data["overall"][mode]
        f[f"pub.band.{mode}.n"] = str(o["n"])
        for key in ("inside", "above", "below", "half_width"):
            f[f"pub.band.{mode}.{key}"] = num(100 * o[f"band_{key}"], 0)


def long_context(f: Figures) -> None:
    """`validate --long-context`: the rows asked of all gathered, and per mode the overall error and the share whose
    'speculation pays' is called right."""
    data = specsim_json("validate", "--long-context")
    f["pub.lc.rows"], f["pub.lc.asked"] = str(data["counts"]["rows"]), str(data["counts"]["askable"])
    for g in data["groups"]:
        if g["group"] == "OVERALL":
            f[f"pub.lc.{g['mode']}.n"] = str(g["n"])
            f[f"pub.lc.{g['mode']}.err"] = num(100 * g["median_abs_error"], 1)
            f[f"pub.lc.{g['mode']}.pays"] = num(100 * g["pays_right"], 0)


def published() -> Figures:
    data = specsim_json("validate", "--published")
    f = Figures()
    bands(f, data)
    long_context(f)
    f["pub.table"] = published_table(data)
    f["pub.date"] = ""  # sticky: today's date when another pub figure changed (readme_figures.STICKY)
    crossovers(f, data)
    still_off(f, data)
    return f

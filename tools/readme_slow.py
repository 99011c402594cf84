"""The README's slow figures (minutes), kept as records in benchmarks/results.json: each is refreshed by running
the tool's own command or benchmark, and the README's figures are written from the record (so that a check reads
them in milliseconds). tools/readme_figures.py decides when to refresh; tools/readme_speed.py renders `speed`."""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tools.readme_common import ROOT, Figures, SourceError, cell, count, num, pct, run, span, specsim_json

#: the GPUs of the README's kernel table (the profiles fitted to NVIDIA's tables), as the table names them
KERNEL_GPUS = {"h100-sxm": "H100 SXM", "h200": "H200", "b200": "B200", "b300": "B300", "gb200": "GB200",
               "a100-sxm-80gb": "A100 SXM 80GB", "l40s": "L40S"}
KERNEL_COLUMNS = (("GEMM bf16", "gemm", "bf16 all"), ("GEMM fp8", "gemm", "fp8 all"),
                  ("decode attention (KV > 128)", "attention", "decode kv>128 all"),
                  ("same, batch 1–16", "attention", "decode kv>128 batch=1-16"),
                  ("prefill attention", "attention", "prefill all"), ("fused MoE", "moe", "all"))


def machine() -> dict[str, Any]:
    """Where and when a record was made."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return {"date": datetime.date.today().isoformat(), "cores": os.cpu_count(), "cpu": cpu,
            "python": platform.python_version(), "commit": head.stdout.strip()}


def bench_json(script: str, *args: str, timeout_s: float = 1800) -> Any:
    """The JSON a benchmark script writes with `--json PATH` (whatever its exit status: bench_cli.py exits 1 when a
    time is over its floor, and that time is what the README must show)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        argv = ["python", f"benchmarks/{script}", *args, "--json", str(out)]
        stdout = run(argv, timeout_s, check=False)
        if not out.exists():
            tail = " / ".join(stdout.strip().splitlines()[-3:])
            raise SourceError(f"{' '.join(argv[:2])} {' '.join(args)} wrote no JSON: {tail}")
        return json.loads(out.read_text())


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


# -- refreshing a record ------------------------------------------------------------------------------------------

def refresh_serving() -> dict[str, Any]:
    data, seconds = _timed(lambda: specsim_json("validate", "--serving", timeout_s=3600))
    return {"seconds": seconds, "groups": data["groups"], "not_stated": data["not_stated"]}


def refresh_kernels() -> dict[str, Any]:
    keep = {(op, group) for _, op, group in KERNEL_COLUMNS}
    rows = {}
    for gpu in KERNEL_GPUS:
        rep = specsim_json("calibrate-tables", "-H", gpu, "--score-only", "--family", "kernels")
        rows[gpu] = [r for r in rep if r.get("framework", "vllm") == "vllm" and (
            ((r["op"], r["group"]) in keep and r["rows"] == "held-out") or r["op"] == "allreduce")]
    return {"aiconfigurator_core": importlib.metadata.version("aiconfigurator-core"), "gpus": rows}


def refresh_modules() -> dict[str, Any]:
    return {"aiconfigurator_core": importlib.metadata.version("aiconfigurator-core"),
            "rows": specsim_json("validate", "--modules")}


def refresh_priors() -> dict[str, Any]:
    return dict(bench_json("priors_floors.py", "--only", "corpus"))


def refresh_deploy() -> dict[str, Any]:
    return dict(bench_json("deployment_holdout.py"))


def refresh_tests() -> dict[str, Any]:
    return dict(bench_json("bench_tests.py", timeout_s=3600))


# -- figures from a record ----------------------------------------------------------------------------------------

def serving_table(groups: list[dict[str, Any]]) -> str:
    """Per group: rows priced in either mode, the on / off throughput ratio (measured AL; priors), the TPOT ratio,
    both arms' absolute figures and the crossovers, all from `validate --serving`."""
    by = {(g["group"], g["mode"]): g for g in groups}
    names = [g["group"] for g in groups if g["mode"] == "priors" and g["group"] != "OVERALL"]
    lines = ["| group | rows stated | x tok/s: measured AL | x tok/s: priors | x TPOT (priors) | tok/s, TPOT (priors) "
             "| crossovers (priors) |", "|---|---|---|---|---|---|---|"]
    total = 0
    for name in [*names, "OVERALL"]:
        m, p = by[(name, "measured")], by[(name, "priors")]
        stated = max(m["stated"], p["stated"]) if name != "OVERALL" else total
        if name != "OVERALL":
            if not stated:
                continue
            total += stated
        tpot = cell(1, p["tpot_ratio_abs"], p["tpot_ratio_bias"]).removeprefix("1: ")
        arms = ", ".join("—" if x is None else pct(x) for x in (p["tput_abs"], p["tpot_abs"]))
        cross = f"{p['crossover_hits']}/{p['crossover_n']}" if p["crossover_n"] else "—"
        label = "**overall**" if name == "OVERALL" else name
        lines.append(f"| {label} | {stated}/{p['rows']} | {cell(m['ratio_n'], m['ratio_abs'], m['ratio_bias'])} | "
                     f"{cell(p['ratio_n'], p['ratio_abs'], p['ratio_bias'])} | {tpot} | {arms} | {cross} |")
    return "\n".join(lines)


def _not_stated(counts: Mapping[str, int], word: str) -> str:
    hits = [n for why, n in counts.items() if word in why]
    if len(hits) != 1:
        raise SourceError(f"validate --serving: no single not-stated reason naming {word!r} ({dict(counts)})")
    return str(hits[0])


def serving_figures(rec: Mapping[str, Any], f: Figures) -> None:
    data = rec["data"]
    f["serving.table"] = serving_table(data["groups"])
    f["serving.date"] = rec["date"]
    f["serving.no_concurrency"] = _not_stated(data["not_stated"], "concurrency")
    f["serving.other_target"] = _not_stated(data["not_stated"], "another target")
    f["serving.seconds"] = num(data["seconds"], 0)
    for g in data["groups"]:
        if g["group"] == "OVERALL":
            f[f"serving.band.{g['mode']}.inside"] = num(100 * g["band_inside"], 0)
            f[f"serving.band.{g['mode']}.half_width"] = num(100 * g["band_half_width"], 0)
            f[f"serving.band.{g['mode']}.n"] = str(g["band_n"])


def kernels_figures(rec: Mapping[str, Any], f: Figures) -> None:
    data = rec["data"]
    head = "| GPU | " + " | ".join(c for c, _, _ in KERNEL_COLUMNS) + " | all-reduce (in-sample) |"
    lines = [head, "|---|" + "---|" * (len(KERNEL_COLUMNS) + 1)]
    for gpu, label in KERNEL_GPUS.items():
        rows = data["gpus"][gpu]
        cells = []
        for _, op, group in KERNEL_COLUMNS:
            hit = [r["mape_pct"] for r in rows if r["op"] == op and r["group"] == group and r["mape_pct"] is not None]
            cells.append(f"{hit[0]:.1f}%" if hit else "—")
        ar = [r["mape_pct"] for r in rows if r["op"] == "allreduce" and r["mape_pct"] is not None]
        cells.append(f"≤ {max(ar):.1f}%" if ar else "—")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    f["kernels.table"] = "\n".join(lines)
    f["kernels.aic_version"] = ".".join(data["aiconfigurator_core"].split(".")[:2])


def modules_figures(rec: Mapping[str, Any], f: Figures) -> None:
    rows = rec["data"]["rows"]

    def errs(framework: str, family: str, batch: str = "all") -> list[float]:
        out = [r["median |error| %"] for r in rows if r["framework"] == framework and r["family"] == family
               and r["batch"] == batch and r["median |error| %"] is not None]
        if not out:
            raise SourceError(f"validate --modules: no {framework} {family} rows at batch {batch}")
        return out

    f["modules.gdn.vllm"] = span(errs("vllm", "gdn decode"))
    f["modules.gdn.sglang"] = span(errs("sglang", "gdn decode"))
    f["modules.gdn.small_batch"] = span(errs("vllm", "gdn decode", "1-16") + errs("sglang", "gdn decode", "1-16"))
    f["modules.dsa.sglang"] = span(errs("sglang", "dsa generation"))
    f["modules.dsa.sglang_small_batch"] = span(errs("sglang", "dsa generation", "1-16"))
    bias = [r["bias %"] for r in rows if r["framework"] == "vllm" and r["family"] == "dsa generation"
            and r["batch"] == "all"]
    f["modules.dsa.vllm_ratio"] = span([1 / (1 + b / 100) for b in bias])  # the tables' time over ours
    f["modules.trtllm"] = span(errs("trtllm", "gdn decode") + errs("trtllm", "dsa generation"), 0)
    f["modules.aic_version"] = ".".join(rec["data"]["aiconfigurator_core"].split(".")[:2])


def priors_figures(rec: Mapping[str, Any], f: Figures) -> None:
    data = rec["data"]
    f["priors.in_sample"] = pct(data["in_sample"]["all"]["median_abs"])
    held = data["held_out"]["all"]
    f["priors.held_out"] = pct(held["median_abs"])
    f["priors.held_out_n"] = count(held["n"])
    f["priors.held_out_coverage"] = pct(held["coverage"], 0)
    stated = data["held_out_stated"]["all"]
    f["priors.stated"] = pct(stated["median_abs"])
    f["priors.stated_n"] = count(stated["n"])
    groups = data["held_out_stated"]["groups"]
    worst = sorted(groups, key=lambda g: groups[g]["median_abs"])[-2:]
    f.claim(set(worst) == {"trtllm-ngram-b200", "leviathan-tpu"}, "the README names n-gram on B200 and Leviathan's "
            f"TPU figures as the priors' misses; the worst held-out groups are now {worst}: reword")


def deploy_figures(rec: Mapping[str, Any], f: Figures) -> None:
    """benchmarks/deployment_holdout.py: per protocol, the median |error| of the held-out figures and the share
    inside the fitted deployment's 80% band."""
    for mode, got in rec["data"].items():
        s = got["summary"]
        for key in ("ratio", "tpot_ratio", "tok", "tpot", "inside80"):
            if mode != "loglog" or key != "inside80":
                f[f"deploy.{mode}.{key}"] = pct(s[key], 0 if key == "inside80" else 1)
        for key in ("deployments", "points"):
            f[f"deploy.{mode}.{key}"] = count(s[key])
    data = rec["data"]
    f.claim(data["given"]["summary"]["tok"] < data["loglog"]["summary"]["tok"], "the README says a two-load fit "
            "predicts the loads between better than log-log interpolation; it no longer does: reword")


def tests_figures(rec: Mapping[str, Any], f: Figures) -> None:
    data = rec["data"]  # its exit status and pytest's summary stay in the record, for whoever reads the time
    f["tests.wall"] = f"about {round(data['wall_s'] / 60)} minutes on {data['cores']} cores"

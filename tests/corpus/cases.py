"""The corpus of bad inputs (issue #13): every field of each bundled scenario, hardware profile and model
config mutated to a wrong type, an out-of-range value, missing or unknown; broken encodings, nesting,
empty files and folders for every kind of input file (tests/corpus/files/ holds those kept as files);
bad measurement CSVs and acceptance files; bad options; unsafe output targets.

Each case is a command, the files it needs (written into a fresh folder, `{d}` in the arguments) and
the substrings its one line on stderr must hold (the input and the field or option it names).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
FILES = Path(__file__).resolve().parent / "files"
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
PROFILES = ("h100-sxm", "a100-sxm-80gb", "h200")
MODEL = "llama-3.1-8b"

DIR = object()  # a file entry that is a folder instead


@dataclass
class Case:
    id: str
    args: list[str]
    expect: tuple[str, ...]
    files: dict[str, Any] = field(default_factory=dict)  # name -> str | bytes | DIR
    setup: Callable[[Path], None] | None = None  # extra preparation of the folder (symlinks, ...)


def _yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False)


def _set(data: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(data)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def _drop(data: dict[str, Any], key: str) -> dict[str, Any]:
    out = copy.deepcopy(data)
    out.pop(key, None)
    return out


# --- scenarios --------------------------------------------------------------------------------------

SCENARIO_MUTATIONS: list[tuple[str, tuple[Any, ...], Any, str]] = [
    # (label, path, value, field named in the message)
    ("tp-3", ("tp",), 3, "tp"), ("tp-0", ("tp",), 0, "tp"), ("tp-str", ("tp",), "eight", "tp"),
    ("tp-float", ("tp",), 2.5, "tp"), ("tp-huge", ("tp",), 4096, "tp"),
    ("weight-dtype", ("weight_dtype",), "fp4", "weight_dtype"), ("kv-dtype", ("kv_dtype",), "int4", "kv_dtype"),
    ("objective", ("objective",), "fastest", "objective"),
    ("slo-negative", ("slo_ms_per_token",), -5, "slo_ms_per_token"),
    ("slo-str", ("slo_ms_per_token",), "fast", "slo_ms_per_token"),
    ("max-k-negative", ("max_k",), -1, "max_k"), ("max-k-huge", ("max_k",), 1000, "max_k"),
    ("max-k-float", ("max_k",), 2.5, "max_k"),
    ("mem-util-zero", ("memory_utilization",), 0, "memory_utilization"),
    ("mem-util-big", ("memory_utilization",), 1.5, "memory_utilization"),
    ("mem-util-nan", ("memory_utilization",), float("nan"), "memory_utilization"),
    ("price-negative", ("gpu_hour_usd",), -2.5, "gpu_hour_usd"),
    ("price-list", ("gpu_hour_usd",), [2.5], "gpu_hour_usd"),
    ("hardware-unknown", ("hardware",), "h999", "hardware"), ("hardware-int", ("hardware",), 100, "hardware"),
    ("model-unknown", ("model",), "gpt-9", "model"),
    ("drafts-empty", ("drafts",), [], "drafts"), ("drafts-str", ("drafts",), "eagle3", "drafts"),
    ("draft-unknown", ("drafts",), ["warp"], "drafts[0]"),
    ("draft-topk-str", ("drafts",), [{"method": "eagle2", "topk": "four"}], "topk"),
    ("draft-topk-zero", ("drafts",), [{"method": "eagle2", "topk": 0}], "topk"),
    ("draft-model-missing", ("drafts",), [{"method": "draft_model"}], "model"),
    ("draft-alpha-big", ("drafts",), [{"method": "eagle3", "acceptance": {"alpha": 1.5}}], "alpha"),
    ("draft-alpha-str", ("drafts",), [{"method": "eagle3", "acceptance": {"alpha": "high"}}], "alpha"),
    ("draft-alphas-str", ("drafts",), [{"method": "eagle3", "acceptance": {"alphas": "0.9"}}], "alphas"),
    ("draft-acceptance-list", ("drafts",), [{"method": "eagle3", "acceptance": [0.7]}], "acceptance"),
    ("draft-acceptance-file", ("drafts",), [{"method": "eagle3", "acceptance": {"file": "absent.txt"}}],
     "absent.txt"),
    ("draft-unknown-field", ("drafts",), [{"method": "eagle3", "colour": "red"}], "colour"),
    ("draft-duplicate", ("drafts",), ["eagle3", "eagle3"], "eagle3"),
    ("draft-tp-3", ("drafts",), [{"method": "draft_model", "model": "{model}", "draft_tp": 3}], "draft_tp"),
    ("load-str", ("load",), "busy", "load"), ("load-empty", ("load",), {}, "load"),
    ("buckets-empty", ("load",), {"buckets": []}, "buckets"),
    ("bucket-batch-zero", ("load",), {"buckets": [{"batch": 0}]}, "batch"),
    ("bucket-batch-str", ("load",), {"buckets": [{"batch": "many"}]}, "batch"),
    ("bucket-batch-huge", ("load",), {"buckets": [{"batch": 10**12}]}, "batch"),
    ("bucket-no-batch", ("load",), {"buckets": [{"context": 1024}]}, "batch"),
    ("bucket-context-negative", ("load",), {"buckets": [{"batch": 8, "context": -5}]}, "context"),
    ("bucket-context-str", ("load",), {"buckets": [{"batch": 8, "context": "long"}]}, "context"),
    ("bucket-shares-0.7", ("load",), {"buckets": [{"batch": 8, "context": {1024: 0.5, 4096: 0.2}}]}, "context"),
    ("bucket-share-negative", ("load",), {"buckets": [{"batch": 8, "context": {1024: -0.5, 4096: 1.5}}]},
     "context"),
    ("bucket-hours-negative", ("load",), {"buckets": [{"batch": 8, "hours": -3}]}, "hours"),
    ("bucket-hours-zero", ("load",), {"buckets": [{"batch": 8, "hours": 0}]}, "hours"),
    ("bucket-unknown-field", ("load",), {"buckets": [{"batch": 8, "users": 5}]}, "users"),
    ("bucket-not-mapping", ("load",), {"buckets": [8]}, "buckets[0]"),
    ("arrival-zero", ("load",), {"arrival_rate_rps": 0}, "arrival_rate_rps"),
    ("arrival-str", ("load",), {"arrival_rate_rps": "lots"}, "arrival_rate_rps"),
    ("arrival-prompt-zero", ("load",), {"arrival_rate_rps": 1, "prompt_tokens": 0}, "prompt_tokens"),
    ("arrival-and-buckets", ("load",), {"arrival_rate_rps": 1, "buckets": [{"batch": 8}]}, "buckets"),
    ("arrival-unknown", ("load",), {"arrival_rate_rps": 1, "burst": 3}, "burst"),
    ("unknown-top", ("colour",), "red", "colour"),
]


def scenario_cases() -> list[Case]:
    cases = []
    for path in SCENARIOS:
        base = yaml.safe_load(path.read_text())
        for label, p, value, name in SCENARIO_MUTATIONS:
            if label == "draft-tp-3":  # the target itself as draft model: same tokenizer, tp 3 splits no bundled model
                value = [{**value[0], "model": base["model"]}]
            data = _set(base, p, value)
            cases.append(Case(f"scenario-{path.stem}-{label}", ["plan", "{d}/s.yaml"], ("s.yaml", name),
                              {"s.yaml": _yaml(data)}))
        for key in ("hardware", "model", "load"):
            if key == "load" and "traffic" in base:
                continue  # a simulated-traffic scenario needs no load buckets
            cases.append(Case(f"scenario-{path.stem}-missing-{key}", ["plan", "{d}/s.yaml"], ("s.yaml", key),
                              {"s.yaml": _yaml(_drop(base, key))}))
    # hardware / model that are not names: a list (the fuzz test's find: its text made an over-long path that
    # the OS refused, an internal error), a number, an empty string
    for key in ("hardware", "model"):
        for label, value in (("list", [None, [{"x": None}] * 40]), ("number", 7), ("empty", "")):
            data = {"hardware": "h100-sxm", "model": "llama-3.1-8b", "drafts": ["eagle3"],
                    "load": {"buckets": [{"batch": 8, "context": 2048}]}, key: value}
            cases.append(Case(f"scenario-{key}-{label}", ["plan", "{d}/s.yaml"], ("s.yaml", key),
                              {"s.yaml": _yaml(data)}))
    # a model that does not fit (plan and report), an arrival rate nothing serves
    big = {"hardware": "h100-sxm", "model": "llama-3.1-70b", "drafts": ["eagle3"],
           "load": {"buckets": [{"batch": 8, "context": 2048}]}}
    cases.append(Case("scenario-70b-one-h100-plan", ["plan", "{d}/s.yaml"], ("s.yaml", "does not fit", "GiB"),
                      {"s.yaml": _yaml(big)}))
    cases.append(Case("scenario-70b-one-h100-report", ["report", "{d}/s.yaml", "-o", "{d}/rep"],
                      ("s.yaml", "does not fit"), {"s.yaml": _yaml(big)}))
    rate = {**big, "load": {"arrival_rate_rps": 0.5, "prompt_tokens": 2000, "output_tokens": 8000}}
    cases.append(Case("scenario-70b-one-h100-arrival", ["plan", "{d}/s.yaml"], ("s.yaml", "does not fit"),
                      {"s.yaml": _yaml(rate)}))
    huge_ctx = {**big, "tp": 8, "load": {"buckets": [{"batch": 8, "context": 100_000_000}]}}
    cases.append(Case("scenario-context-1e8", ["plan", "{d}/s.yaml"], ("s.yaml", "131,072-token window"),
                      {"s.yaml": _yaml(huge_ctx)}))
    return cases


# --- hardware profiles --------------------------------------------------------------------------------

HARDWARE_MUTATIONS: list[tuple[str, tuple[Any, ...] | str, Any, str]] = [
    ("sm-count-str", ("sm_count",), "many", "sm_count"), ("sm-count-negative", ("sm_count",), -132, "sm_count"),
    ("sm-count-missing", "sm_count", None, "sm_count"),
    ("memory-zero", ("memory_gb",), 0, "memory_gb"), ("memory-missing", "memory_gb", None, "memory_gb"),
    ("memory-inf", ("memory_gb",), float("inf"), "memory_gb"),
    ("bw-str", ("mem_bw_tb_per_s",), "fast", "mem_bw_tb_per_s"),
    ("bw-negative", ("mem_bw_tb_per_s",), -3.35, "mem_bw_tb_per_s"),
    ("l2-zero", ("l2_mb",), 0, "l2_mb"), ("launch-negative", ("launch_overhead_us",), -1, "launch_overhead_us"),
    ("clock-str", ("clock_mhz",), "turbo", "clock_mhz"),
    ("peaks-str", ("peak_tflops",), "lots", "peak_tflops"), ("peaks-missing", "peak_tflops", None, "peak_tflops"),
    ("bf16-null", ("peak_tflops", "bf16"), None, "bf16"), ("bf16-negative", ("peak_tflops", "bf16"), -989, "bf16"),
    ("bf16-str", ("peak_tflops", "bf16"), "989", "bf16"), ("peak-unknown", ("peak_tflops", "fp3"), 5, "fp3"),
    ("interconnect-str", ("interconnect",), "nvlink", "interconnect"),
    ("interconnect-missing", "interconnect", None, "interconnect"),
    ("link-negative", ("interconnect", "link_bw_gb_per_s"), -450, "link_bw_gb_per_s"),
    ("busbw-zero", ("interconnect", "allreduce_busbw_gb_per_s"), 0, "allreduce_busbw_gb_per_s"),
    ("by-world-size-str", ("interconnect", "allreduce_by_world_size"), "fitted", "allreduce_by_world_size"),
    ("by-world-size-key", ("interconnect", "allreduce_by_world_size"), {"one": {"latency_us": 5}},
     "allreduce_by_world_size"),
    ("efficiency-str", ("efficiency",), "good", "efficiency"),
    ("efficiency-gemm-big", ("efficiency", "gemm_compute"), 1.7, "gemm_compute"),
    ("efficiency-memory-negative", ("efficiency", "memory"), -0.9, "memory"),
    ("efficiency-unknown", ("efficiency", "magic"), 1.0, "magic"),
    ("efficiency-throttle-negative", ("efficiency", "power_throttle"), -0.1, "power_throttle"),
    ("vendor", ("vendor",), "intel", "vendor"), ("name-missing", "name", None, "name"),
    ("name-int", ("name",), 100, "name"), ("provenance-list", ("provenance",), [1, 2], "provenance"),
    ("unknown-top", ("colour",), "green", "colour"),
]


def hardware_cases() -> list[Case]:
    from specsim.cost.hardware import profiles_dir

    cases = []
    for name in PROFILES:
        base = yaml.safe_load((profiles_dir() / f"{name}.yaml").read_text())
        for label, p, value, fld in HARDWARE_MUTATIONS:
            data = _drop(base, p) if isinstance(p, str) else _set(base, p, value)
            cases.append(Case(f"hardware-{name}-{label}", ["hardware", "show", "{d}/hw.yaml"], ("hw.yaml", fld),
                              {"hw.yaml": _yaml(data)}))
    # the same profile through the commands that take --hardware
    bad = _set(yaml.safe_load((profiles_dir() / "h100-sxm.yaml").read_text()), ("peak_tflops", "bf16"), None)
    for cmd in (["ops", "-m", MODEL], ["forward", "-m", MODEL],
                ["evaluate", "-m", MODEL, "--draft", "eagle3", "--k", "3"],
                ["predict", "{d}/m.csv", "-o", "{d}/p.csv"]):
        cases.append(Case(f"hardware-bf16-null-{cmd[0]}", [*cmd, "-H", "{d}/hw.yaml"], ("hw.yaml", "bf16"),
                          {"hw.yaml": _yaml(bad), "m.csv": "op,tokens,d_in,d_out,time_ms\ngemm,1,4096,4096,0.02\n"}))
    return cases


# --- model configs ------------------------------------------------------------------------------------

MODEL_MUTATIONS: list[tuple[str, str, Any]] = [
    ("hidden_size", "hidden_size", "big"), ("hidden_size", "hidden_size", -4096), ("hidden_size", "hidden_size", 0),
    ("hidden_size", "hidden_size", None), ("num_attention_heads", "num_attention_heads", 0),
    ("num_attention_heads", "num_attention_heads", "32"), ("num_attention_heads", "num_attention_heads", None),
    ("num_hidden_layers", "num_hidden_layers", -1), ("num_hidden_layers", "num_hidden_layers", 2.5),
    ("vocab_size", "vocab_size", None), ("vocab_size", "vocab_size", "128k"),
    ("intermediate_size", "intermediate_size", 0), ("intermediate_size", "intermediate_size", None),
    ("num_key_value_heads", "num_key_value_heads", 3), ("num_key_value_heads", "num_key_value_heads", "8"),
    ("num_key_value_heads", "num_key_value_heads", -8), ("head_dim", "head_dim", -128),
    ("head_dim", "head_dim", "128"), ("model_type", "model_type", "gpt9"), ("model_type", "model_type", None),
]


def model_cases() -> list[Case]:
    from specsim.cost.model import catalogue_dir

    cases = []
    base = json.loads((catalogue_dir() / f"{MODEL}.json").read_text())
    for i, (label, key, value) in enumerate(MODEL_MUTATIONS):
        data = _drop(base, key) if value is None else _set(base, (key,), value)
        cases.append(Case(f"model-{label}-{i}", ["models", "show", "{d}/config.json"], ("config.json", key),
                          {"config.json": json.dumps(data)}))
    # through the commands that take --model, and a folder holding the config
    bad = json.dumps(_set(base, ("num_key_value_heads",), 3))
    for cmd in (["ops", "-H", "h100-sxm"], ["forward", "-H", "h100-sxm"],
                ["evaluate", "-H", "h100-sxm", "--draft", "eagle3", "--k", "3"]):
        cases.append(Case(f"model-kv-heads-{cmd[0]}", [*cmd, "-m", "{d}/cfg"], ("config.json", "num_key_value_heads"),
                          {"cfg": DIR, "cfg/config.json": bad}))
    return cases


# --- broken files of every kind ------------------------------------------------------------------------

BROKEN = {  # name -> content (the same for every kind of input)
    "empty": b"",
    "binary": bytes(range(256)) * 4,
    "latin1": "name: caf\xe9\nhardware: h100-sxm\n".encode("latin-1"),
    "utf16": "name: x\nhardware: h100-sxm\n".encode("utf-16"),
    "nested-yaml": ("[" * 3000 + "]" * 3000).encode(),
    "nested-map": ("a: " + "{b: " * 3000 + "1" + "}" * 3000).encode(),
    "nested-json": ("[" * 100_000 + "]" * 100_000).encode(),
    "not-mapping": b"- just\n- a\n- list\n",
    "scalar": b"42\n",
    "bad-yaml": b"name: [unclosed\nhardware: {\n",
    "tabs": b"name:\n\t- x\n",
    "zero-bytes": b"\x00" * 64,
}
KINDS = [  # (kind, file name, command)
    ("scenario", "in.yaml", ["plan", "{f}"]),
    ("report", "in.yaml", ["report", "{f}", "-o", "{d}/rep"]),
    ("sweep", "in.yaml", ["sweep", "{f}", "-o", "{d}/sweep.csv"]),
    ("hardware", "in.yaml", ["hardware", "show", "{f}"]),
    ("hardware-ops", "in.yaml", ["ops", "-H", "{f}", "-m", MODEL]),
    ("model", "in.json", ["models", "show", "{f}"]),
    ("model-forward", "in.json", ["forward", "-H", "h100-sxm", "-m", "{f}"]),
    ("acceptance", "in.yaml", ["evaluate", "-c", "0.05", "--k", "3", "--acceptance", "{f}"]),
    ("tree", "in.yaml", ["evaluate", "-c", "0.05", "--alpha", "0.7", "--tree", "{f}"]),
    ("measurements", "in.csv", ["predict", "{f}", "-o", "{d}/p.csv"]),
]


def broken_cases() -> list[Case]:
    cases = []
    kept = {p.name: p.read_bytes() for p in FILES.iterdir()} if FILES.is_dir() else {}
    for kind, name, cmd in KINDS:
        for label, content in BROKEN.items():
            if kind in ("measurements",) and label in ("not-mapping", "scalar", "tabs", "bad-yaml"):
                continue  # text that is (oddly) valid CSV: covered by the CSV cases
            if kind == "acceptance" and label in ("not-mapping", "scalar", "tabs"):
                continue
            args = [a.replace("{f}", "{d}/" + name) for a in cmd]
            cases.append(Case(f"broken-{kind}-{label}", args, (name,), {name: content}))
        args = [a.replace("{f}", "{d}/folder") for a in cmd]
        cases.append(Case(f"broken-{kind}-folder", args, ("folder",), {"folder": DIR}))
        args = [a.replace("{f}", "{d}/absent" + Path(name).suffix) for a in cmd]
        cases.append(Case(f"broken-{kind}-missing", args, ("absent",), {}))
        args = [a.replace("{f}", "/dev/null") for a in cmd]
        cases.append(Case(f"broken-{kind}-device", args, ("/dev/null",), {}))
    for fname, content in sorted(kept.items()):  # tests/corpus/files/: the same, kept as files
        cases.append(Case(f"kept-{fname}", ["plan", "{d}/" + fname], (fname,), {fname: content}))
    return cases


# --- measurement CSVs and acceptance files ---------------------------------------------------------------

CSV = {
    "no-op-column": ("device,tokens,time_ms\nh100-sxm,1,0.1\n", "op"),
    "header-only": ("op,time_ms\n", "no rows"),
    "time-zero": ("op,device,tokens,d_in,d_out,time_ms\ngemm,h100-sxm,1,4096,4096,0\n", "time_ms"),
    "time-negative": ("op,device,tokens,d_in,d_out,time_ms\ngemm,h100-sxm,1,4096,4096,-0.5\n", "time_ms"),
    "time-nan": ("op,device,tokens,d_in,d_out,time_ms\ngemm,h100-sxm,1,4096,4096,nan\n", "time_ms"),
    "time-inf": ("op,device,tokens,d_in,d_out,time_ms\ngemm,h100-sxm,1,4096,4096,inf\n", "time_ms"),
    "time-text": ("op,device,tokens,d_in,d_out,time_ms\ngemm,h100-sxm,1,4096,4096,fast\n", "time_ms"),
    "ragged-short": ("op,device,tokens,d_in,d_out,time_ms\ngemm,h100-sxm,1,4096,4096\n", "row 2"),
    "ragged-long": ("op,device,tokens,d_in,d_out,time_ms\ngemm,h100-sxm,1,4096,4096,0.1,9\n", "row 2"),
    "tokens-text": ("op,device,tokens,d_in,d_out,time_ms\ngemm,h100-sxm,one,4096,4096,0.1\n", "tokens"),
    "tokens-negative": ("op,device,tokens,d_in,d_out,time_ms\ngemm,h100-sxm,-1,4096,4096,0.1\n", "tokens"),
    "bytes-inf": ("op,device,bytes,world_size,time_ms\nallreduce,h100-sxm,inf,8,0.1\n", "bytes"),
    "unknown-device": ("op,device,tokens,d_in,d_out,time_ms\ngemm,tpu-v9,1,4096,4096,0.1\n", "tpu-v9"),
    "quote-unclosed": ('op,device,time_ms\n"gemm,h100-sxm,0.1\n', "m.csv"),
}
ACCEPTANCE = {
    "no-metrics.txt": ("# TYPE foo counter\nfoo_total 3\n", "no speculative-decoding metrics"),
    "zero-drafts.txt": ("vllm:spec_decode_num_drafts_total 0\nvllm:spec_decode_num_accepted_tokens_total 0\n",
                        "num_drafts"),
    "bad-position.txt": ("vllm:spec_decode_num_drafts_total 10\nvllm:spec_decode_num_accepted_tokens_total 5\n"
                         'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="x"} 5\n', "position"),
    "sglang-low.txt": ("sglang:spec_accept_length 0.5\n", "spec_accept_length"),
    "alpha-big.yaml": ("alpha: 1.5\n", "alpha"),
    "alpha-str.yaml": ("alpha: high\n", "acceptance"),
    "alphas-str.yaml": ("alphas: [0.9, high]\n", "acceptance"),
    "nothing.yaml": ("colour: red\n", "no acceptance"),
    "mean-no-k.yaml": ("mean_length: 3.2\n", "mean_length"),
    "hist-bad.csv": ("accepted_drafts,count\n0,ten\n", "histogram"),
    "hist-header.csv": ("drafts,n\n0,10\n", "header"),
    "hist-negative-key.csv": ("tokens_per_step,count\n0,10\n", "histogram"),
}


def table_cases() -> list[Case]:
    cases = []
    for label, (text, name) in CSV.items():
        cases.append(Case(f"csv-predict-{label}", ["predict", "{d}/m.csv", "-o", "{d}/p.csv"], ("m.csv", name)
                          if label != "unknown-device" else ("tpu-v9",), {"m.csv": text}))
        if label not in ("unknown-device",):
            cases.append(Case(f"csv-calibrate-{label}", ["calibrate", "{d}/m.csv", "-H", "h100-sxm", "-o",
                                                         "{d}/fit.yaml"], ("m.csv", name), {"m.csv": text}))
    for fname, (text, name) in ACCEPTANCE.items():
        cases.append(Case(f"acceptance-{fname}", ["evaluate", "-c", "0.05", "--acceptance", "{d}/" + fname],
                          (fname, name), {fname: text}))
        scen = {"hardware": "h100-sxm", "model": MODEL, "drafts": [{"method": "eagle3", "acceptance":
                                                                    {"file": fname}}],
                "load": {"buckets": [{"batch": 8}]}}
        cases.append(Case(f"acceptance-in-scenario-{fname}", ["plan", "{d}/s.yaml"], (fname,),
                          {fname: text, "s.yaml": _yaml(scen)}))
    corpus_header = (ROOT / "specsim" / "validation" / "data" / "published.csv").read_text(
        encoding="utf-8").splitlines()[0]
    tpu_row = ("x,g,src,tpu-v4,,stated,1,1,tpu,,t5-xxl,draft_model,t5-small,chain,7,,,1,,0.0,wmt,,0.75,3.4,latency"
               ",,,,")
    for label, text, expect in (
            ("header-only", corpus_header + "\n", ("c.csv", "none of the corpus")),
            ("nothing-priceable", corpus_header + "\n" + tpu_row + "\n", ("c.csv", "engine 'tpu'")),
            ("missing-columns", "id,foo\n1,2\n", ("c.csv", "missing column")),
            ("not-csv", "\x00\x01binary", ("c.csv",))):
        cases.append(Case(f"published-corpus-{label}", ["validate", "--published", "--corpus", "{d}/c.csv"], expect,
                          {"c.csv": text}))
    return cases


# --- options ---------------------------------------------------------------------------------------------

HW = ["-H", "h100-sxm", "-m", "llama-3.1-70b"]
OPTIONS: list[tuple[str, list[str], tuple[str, ...]]] = [
    ("tokens-empty-item", ["ops", *HW, "--tokens", "1,,2"], ("--tokens",)),
    ("tokens-trailing-comma", ["ops", *HW, "--tokens", "1,2,"], ("--tokens",)),
    ("tokens-zero", ["ops", *HW, "--tokens", "0,1"], ("--tokens",)),
    ("tokens-text", ["forward", *HW, "--tokens", "many"], ("--tokens",)),
    ("tokens-reversed-range", ["forward", *HW, "--tokens", "16-1"], ("--tokens",)),
    ("tokens-huge-range", ["forward", *HW, "--tokens", "1-100000000"], ("--tokens",)),
    ("tp-3-ops", ["ops", *HW, "--tp", "3"], ("--tp", "3")),
    ("tp-3-forward", ["forward", *HW, "--tp", "3"], ("--tp",)),
    ("tp-3-evaluate", ["evaluate", *HW, "--tp", "3", "--draft", "eagle3", "--k", "3"], ("--tp",)),
    ("tp-16-kv", ["evaluate", "-H", "h100-sxm", "-m", "qwen2.5-7b", "--tp", "8", "--draft", "eagle3", "--k", "3"],
     ("--tp",)),
    ("tp-0", ["ops", *HW, "--tp", "0"], ("--tp",)),
    ("batch-zero", ["ops", *HW, "--batch", "0"], ("--batch",)),
    ("batch-huge", ["evaluate", *HW, "--tp", "8", "--draft", "eagle3", "--k", "3", "--batch", "1000000000"],
     ("--batch",)),
    ("context-negative", ["forward", *HW, "--context", "-1"], ("--context",)),
    ("context-1e8-evaluate", ["evaluate", *HW, "--tp", "8", "--draft", "eagle3", "--k", "3", "--context",
                              "100000000"], ("context 100,000,000 tokens exceeds its 131,072-token window",)),
    ("70b-one-h100-evaluate", ["evaluate", *HW, "--draft", "eagle3", "--k", "4"], ("does not fit", "GiB")),
    ("batch-1e5-evaluate", ["evaluate", *HW, "--tp", "8", "--draft", "eagle3", "--k", "4", "--batch", "100000"],
     ("does not fit",)),
    ("weight-dtype", ["ops", *HW, "--weight-dtype", "fp4"], ("fp4",)),
    ("weight-dtype-alias-clash", ["ops", *HW, "--weight-dtype", "fp8", "--dtype", "bf16"], ("--weight-dtype",)),
    ("kv-dtype", ["forward", *HW, "--kv-dtype", "int4"], ("int4",)),
    ("alpha-big", ["evaluate", "-c", "0.05", "--k", "3", "--alpha", "1.5"], ("--alpha",)),
    ("alpha-nan", ["evaluate", "-c", "0.05", "--k", "3", "--alpha", "nan"], ("--alpha",)),
    ("alphas-empty-item", ["evaluate", "-c", "0.05", "--alphas", "0.9,,0.8"], ("--alphas",)),
    ("alphas-text", ["evaluate", "-c", "0.05", "--alphas", "high"], ("--alphas",)),
    ("k-negative", ["evaluate", "-c", "0.05", "--alpha", "0.7", "--k", "-1"], ("--k",)),
    ("ratio-negative", ["evaluate", "-c", "-1", "--alpha", "0.7", "--k", "3"], ("--draft-cost-ratio",)),
    ("ratio-inf", ["evaluate", "-c", "inf", "--alpha", "0.7", "--k", "3"], ("--draft-cost-ratio",)),
    ("target-step-zero", ["evaluate", "-c", "0.1", "--alpha", "0.7", "--k", "3", "--target-step-ms", "0"],
     ("--target-step-ms",)),
    ("overhead-negative", ["evaluate", "-c", "0.1", "--alpha", "0.7", "--k", "3", "--extra-overhead-ms", "-1"],
     ("--extra-overhead-ms",)),
    ("no-cost", ["evaluate", "--alpha", "0.7", "--k", "3"], ("--draft-cost-ratio",)),
    ("draft-unknown", ["evaluate", "-H", "h100-sxm", "-m", MODEL, "--draft", "warp", "--k", "3"], ("warp",)),
    ("hardware-unknown", ["ops", "-H", "h999", "-m", MODEL], ("h999",)),
    ("model-unknown", ["ops", "-H", "h100-sxm", "-m", "gpt-9"], ("gpt-9",)),
    ("samples-small", ["validate", "--samples", "5"], ("--samples",)),
    ("beta-mismatch", ["beta", "--p", "0.5,0.5", "--q", "1"], ("--p",)),
    ("beta-text", ["beta", "--p", "a,b", "--q", "0.5,0.5"], ("--p",)),
    ("beta-temperature", ["beta", "--p", "1,2", "--q", "2,1", "--logits", "--temperature", "-1"],
     ("--temperature",)),
    ("sweep-alphas-old", ["sweep", "scenarios/chat-llama70b-h100.yaml", "-o", "{d}/s.csv", "--alphas", "0.5"],
     ("--alpha-grid",)),
    ("sweep-alpha-grid-big", ["sweep", "scenarios/chat-llama70b-h100.yaml", "-o", "{d}/s.csv", "--alpha-grid",
                              "0.5,2"], ("--alpha-grid",)),
    ("sweep-batch-zero", ["sweep", "scenarios/chat-llama70b-h100.yaml", "-o", "{d}/s.csv", "--batch", "0,8"],
     ("--batch",)),
    ("sweep-batch-and-batches", ["sweep", "scenarios/chat-llama70b-h100.yaml", "-o", "{d}/s.csv", "--batch", "8",
                                 "--batches", "8"], ("--batch",)),
    ("sweep-max-k", ["sweep", "scenarios/chat-llama70b-h100.yaml", "-o", "{d}/s.csv", "--max-k", "-1"],
     ("--max-k",)),
    ("sweep-suffix", ["sweep", "scenarios/chat-llama70b-h100.yaml", "-o", "{d}/s.txt"], ("--output",)),
    ("calibrate-suffix", ["calibrate", "examples/measurements.csv", "-H", "h100-sxm", "-o", "{d}/fit.txt"],
     ("--output",)),
    ("calibrate-starts", ["calibrate", "examples/measurements.csv", "-H", "h100-sxm", "-o", "{d}/fit.yaml",
                          "--starts", "0"], ("--starts",)),
    ("unknown-option", ["ops", *HW, "--colour", "red"], ("--colour",)),
    ("unknown-command", ["frobnicate"], ("frobnicate",)),
    ("missing-option", ["ops", "-H", "h100-sxm"], ("--model",)),
    ("int-option-text", ["ops", *HW, "--batch", "many"], ("--batch",)),
    ("dtype-alias-empty", ["ops", *HW, "--dtype", ""], ("--dtype", "bf16 | fp16 | fp8 | fp8_block | int8 | int4")),
    ("weight-dtype-empty", ["forward", *HW, "--weight-dtype", ""], ("--weight-dtype", "bf16 | fp16 | fp8")),
    ("kv-dtype-empty", ["ops", *HW, "--kv-dtype", ""], ("--kv-dtype", "bf16 | fp16 | fp8")),
    ("kv-dtype-unknown-ops", ["ops", *HW, "--kv-dtype", "int4"], ("--kv-dtype", "int4", "bf16 | fp16 | fp8")),
    ("engine-empty-forward", ["forward", *HW, "--engine", ""], ("--engine",)),
    ("engine-unknown-ops", ["ops", *HW, "--engine", "warp"], ("warp",)),
    ("allreduce-unknown", ["forward", *HW, "--allreduce", "mpi"], ("--allreduce", "mpi")),
    ("weight-dtype-empty-evaluate", ["evaluate", *HW, "-d", "eagle3", "--k", "3", "--weight-dtype", ""],
     ("--weight-dtype",)),
    ("weight-dtype-unknown-evaluate", ["evaluate", *HW, "-d", "eagle3", "--k", "3", "--weight-dtype", "fp4x"],
     ("--weight-dtype", "fp4x")),
    ("engine-configs-missing-parent", ["plan", "scenarios/llama8b-1b-draft-h100.yaml", "--engine-configs",
                                       "{d}/nowhere/cfg"], ("--engine-configs", "nowhere")),
    ("engine-configs-is-file", ["plan", "scenarios/llama8b-1b-draft-h100.yaml", "--engine-configs",
                                "scenarios/llama8b-1b-draft-h100.yaml"], ("--engine-configs",)),
]
FORMAT_COMMANDS = [["hardware", "list"], ["hardware", "show", "h100-sxm"], ["models", "list"],
                   ["models", "show", MODEL], ["ops", "-H", "h100-sxm", "-m", MODEL],
                   ["forward", "-H", "h100-sxm", "-m", MODEL], ["plan", "scenarios/llama8b-1b-draft-h100.yaml"],
                   ["evaluate", "-c", "0.05", "--alpha", "0.7", "--k", "3"], ["validate"],
                   ["beta", "--p", "0.5,0.5", "--q", "0.6,0.4"], ["predict", "examples/measurements.csv", "-o",
                                                                  "{d}/p.csv"],
                   ["sweep", "scenarios/llama8b-1b-draft-h100.yaml", "-o", "{d}/s.csv"],
                   ["report", "scenarios/llama8b-1b-draft-h100.yaml", "-o", "{d}/rep"],
                   ["calibrate", "examples/measurements.csv", "-H", "h100-sxm", "-o", "{d}/fit.yaml"]]


def option_cases() -> list[Case]:
    cases = [Case(f"option-{label}", args, expect) for label, args, expect in OPTIONS]
    for cmd in FORMAT_COMMANDS:
        cases.append(Case(f"format-xml-{'-'.join(cmd[:2])}", [*cmd, "--format", "xml"], ("--format", "xml")))
    return cases


# --- output targets ----------------------------------------------------------------------------------------

WRITERS = {  # command writing OUTPUT (a file, or for report a folder)
    "predict": ["predict", "examples/measurements.csv", "-o"],
    "sweep": ["sweep", "scenarios/llama8b-1b-draft-h100.yaml", "-o"],
    "import": ["import", "vidur", "{d}/vidur", "-o"],
    "calibrate": ["calibrate", "examples/measurements.csv", "-H", "h100-sxm", "--ops", "gemm", "-o"],
    "report": ["report", "scenarios/llama8b-1b-draft-h100.yaml", "-o"],
}


def _link(name: str, target: str) -> Callable[[Path], None]:
    def make(d: Path) -> None:
        (d / name).symlink_to(target if target.startswith("/") else d / target)
    return make


def output_cases() -> list[Case]:
    cases = []
    for cmd, args in WRITERS.items():
        ext = "" if cmd == "report" else (".yaml" if cmd == "calibrate" else ".csv")
        base = {"vidur": DIR} if cmd == "import" else {}
        targets = [
            ("missing-dir", f"{{d}}/nowhere/out{ext}", ("nowhere",), {}, None),
            ("device", "/dev/full", ("/dev/full",), {}, None),
            ("proc", f"/proc/out{ext}", ("/proc",), {}, None),
            ("symlink", f"{{d}}/link{ext}", ("symbolic link",), {f"real{ext}": DIR if cmd == "report" else "x"},
             _link(f"link{ext}", f"real{ext}")),
            ("symlink-dangling", f"{{d}}/dangling{ext}", ("symbolic link",), {}, _link(f"dangling{ext}", "gone")),
        ]
        if cmd == "report":
            targets += [("file", "{d}/rep", ("not a folder",), {"rep": "a file"}, None),
                        ("foreign-folder", "{d}/rep", ("not an earlier specsim report",),
                         {"rep": DIR, "rep/thesis.tex": "mine"}, None),
                        ("current-folder", ".", ("current folder",), {}, None)]
        else:
            targets += [("existing-folder", f"{{d}}/out{ext}", ("is a folder",), {f"out{ext}": DIR}, None),
                        ("parent-is-file", f"{{d}}/file/out{ext}", ("file",), {"file": "x"}, None)]
        for label, target, expect, files, setup in targets:
            cases.append(Case(f"output-{cmd}-{label}", [*args, target], expect, {**base, **files}, setup))
    return cases


def all_cases() -> list[Case]:
    return scenario_cases() + hardware_cases() + model_cases() + broken_cases() + table_cases() + option_cases() \
        + output_cases()

"""Readers for the files serving-benchmark clients write, and for the speculative-decoding acceptance
the engines print in their server logs.

``read_run(path)`` returns one ``BenchRun`` per run in the file, dispatching on the content (not the
extension). ``read_server_log(path)`` returns a ``ServerAcceptance``. Anything unreadable is one
``SpecsimError`` line naming the file (and, in JSON Lines, the line) and what is wrong.

Sources read for the layouts (field names and units):

- vLLM ``vllm bench serve --save-result`` (and ``--append-result``, one object per line):
  ``vllm/benchmarks/serve.py`` at 009e6d4a1cd6 (``result_json`` in ``main_async``: ``model_id``,
  ``num_prompts``, ``request_rate`` written as the string ``"inf"`` for send-all-at-once,
  ``max_concurrency`` null when open-loop; merged with ``benchmark()``'s ``result``: ``duration`` s,
  ``completed``, ``failed``, ``total_input_tokens``, ``total_output_tokens``, ``output_throughput``
  tok/s, ``mean_{ttft,tpot,itl}_ms``; and, when the server exports spec-decode counters,
  ``spec_decode_acceptance_length`` (1 + accepted/drafts), ``spec_decode_num_drafts``,
  ``spec_decode_per_position_acceptance_rates`` (accepted at position i / drafts)). The older
  ``benchmarks/benchmark_serving.py --save-result`` writes the same keys (``request_rate`` as a
  number or ``Infinity``; ``max_concurrency`` absent before late 2024).
- SGLang ``python -m sglang.bench_serving --output-file``: ``python/sglang/bench_serving.py`` (the
  late-2025 layout, identical in ``python/sglang/benchmark/metrics.py::save_results`` at 6e48df336a):
  one ``json.dumps(result)`` line appended per run, with ``request_rate`` (``Infinity`` or
  ``"trace"``), ``max_concurrency``, ``duration``, ``completed``, ``total_input_tokens``,
  ``total_output_tokens``, ``output_throughput``, ``mean_{ttft,tpot,itl}_ms``, ``accept_length``
  (the server's ``avg_spec_accept_length``: tokens per verify step, bonus included) and
  ``server_info`` (``model_path``, ``speculative_algorithm``). No ``num_prompts`` is written: it is
  taken from the per-request lists when ``--output-details`` kept them, else ``completed``. The
  2024 layout (50a613687fe1) wrote only medians and is refused, naming the missing means.
- NVIDIA AIPerf ``profile_export_aiperf.json``: ``aiperf/exporters/json_exporter.py`` and
  ``aiperf/common/models/export_models.py`` at db4f6397d11e (Oct 2025: metrics as objects with
  ``unit``, ``avg``, ``p50``...; ``input_config.loadgen.{concurrency,request_rate,request_count}``,
  ``input_config.endpoint.model_names``) and the schema 1.3 files AIPerf 0.10 writes
  (``input_config.phases[]`` with ``type``, ``concurrency``, ``rate``, ``requests``;
  ``input_config.models.items[].name``). genai-perf ``profile_export_genai_perf.json``
  (``genai_perf/export_data/json_exporter.py`` at 09628cd6d6e3): the same metric objects plus the
  CLI arguments as ``input_config`` (``model``, ``concurrency``, ``request_rate``). AIPerf's
  ``inter_token_latency`` is per request (latency - TTFT) / (tokens - 1), i.e. vLLM's TPOT, and its
  ``inter_chunk_latency`` the pooled gap between chunks, i.e. vLLM's ITL.
- Server logs: vLLM ``vllm/v1/spec_decode/metrics.py`` at ee4ceaae5953 (``SpecDecoding metrics:
  Mean acceptance length: %.2f, ..., Accepted: %d tokens, Drafted: %d tokens, Per-position
  acceptance rate: %.3f, ..., Avg Draft acceptance rate: %.1f%%``, counts per logging interval; the
  mid-2025 order ``Draft acceptance rate: ..%, Mean acceptance length: ..`` reads the same), the V0
  engine's cumulative ``Speculative metrics: ... Number of speculative tokens: k, Number of accepted
  tokens: N, Number of draft tokens: M, Number of emitted tokens: E.``, and SGLang's scheduler
  ``Decode batch. #running-req: R, ..., accept len: L, ...`` (``python/sglang/srt/managers``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specsim.errors import SpecsimError
from specsim.files import read_text


@dataclass(frozen=True)
class BenchRun:
    """One benchmark client run, as the client recorded it."""

    path: str  # the file read (and, for JSON Lines, "#<line number>")
    client: str  # "vllm" | "sglang" | "aiperf"
    concurrency: int | None  # max concurrency (closed loop); None when the client ran open-loop only
    request_rate: float  # requests/s the client sent at; math.inf for "send all at once"; nan for a trace replay
    num_prompts: int  # requests sent
    completed: int  # requests completed
    input_len_mean: float  # mean prompt tokens per completed request
    output_len_mean: float  # mean output tokens per completed request
    duration_s: float
    output_tok_s: float  # output token throughput
    tpot_mean_ms: float
    ttft_mean_ms: float
    itl_mean_ms: float | None
    model_id: str | None  # the model the client asked for, where recorded
    acceptance_length: float | None = None  # mean tokens per step incl. the bonus token, where recorded
    acceptance_per_position: tuple[float, ...] = ()  # unconditional P(draft i accepted) (vLLM)
    speculative: bool | None = None  # whether the server speculated, where the file says


@dataclass(frozen=True)
class ServerAcceptance:
    """Speculative-decoding acceptance aggregated over a server log."""

    engine: str  # "vllm" | "sglang"
    acceptance_length: float  # mean tokens per verify step, bonus token included
    acceptance_per_position: tuple[float, ...]  # vLLM V1 only; () otherwise
    intervals: int  # log lines aggregated
    num_drafts: int | None  # vLLM: drafts over the aggregated lines (draft tokens / k); SGLang: None


_NOT_A_RUN = ("not a vllm bench serve, sglang.bench_serving or AIPerf result "
              "(no 'output_throughput' or 'output_token_throughput')")


def read_run(path: str | Path) -> list[BenchRun]:
    """The runs recorded in a benchmark client's result file (one per JSON Lines line)."""
    name = str(path)
    text = read_text(path)
    if not text.strip():
        raise SpecsimError(f"{name}: empty file")
    return [_to_run(label, obj) for label, obj in _objects(name, text)]


def _objects(name: str, text: str) -> list[tuple[str, dict[str, Any]]]:
    """The JSON objects of a file: the whole text as one document, else one per non-blank line."""
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if whole is not None:
        if not isinstance(whole, dict):
            raise SpecsimError(f"{name}: a JSON {type(whole).__name__}, not a benchmark result object")
        label = f"{name}#1" if name.endswith(".jsonl") else name
        return [(label, whole)]
    out: list[tuple[str, dict[str, Any]]] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            if not out:
                raise SpecsimError(f"{name}: not JSON or JSON Lines (line {n}: {exc})") from None
            raise SpecsimError(f"{name}#{n}: not a complete JSON object ({exc})") from None
        if not isinstance(obj, dict):
            raise SpecsimError(f"{name}#{n}: a JSON {type(obj).__name__}, not a benchmark result object")
        out.append((f"{name}#{n}", obj))
    return out


def _to_run(label: str, d: dict[str, Any]) -> BenchRun:
    if isinstance(d.get("output_token_throughput"), dict):
        return _aiperf(label, d)
    if "output_throughput" not in d:
        raise SpecsimError(f"{label}: {_NOT_A_RUN}")
    sglang_keys = ("total_output_tokens_retokenized", "server_info", "dataset_name", "accept_length")
    vllm_keys = ("model_id", "tokenizer_id", "endpoint_type", "num_prompts")
    if any(k in d for k in sglang_keys) and not any(k in d for k in vllm_keys):
        return _sglang(label, d)
    return _vllm(label, d)


def _finite(label: str, key: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise SpecsimError(f"{label}: field '{key}' is not a finite number ({v!r})")
    return float(v)


def _need(label: str, d: dict[str, Any], keys: tuple[str, ...], what: str) -> dict[str, float]:
    """The named fields (``request_rate`` checked for presence only) as finite floats; one error naming
    every missing field."""
    if missing := [k for k in keys if d.get(k) is None]:
        raise SpecsimError(f"{label}: {what} result missing field(s) {', '.join(missing)}")
    return {k: _finite(label, k, d[k]) for k in keys if k != "request_rate"}


def _rate(label: str, v: Any) -> float:
    if isinstance(v, str):
        low = v.strip().lower()
        if low in ("inf", "infinity", "+inf"):
            return math.inf
        if low == "trace":
            return math.nan
        try:
            v = float(low)
        except ValueError:
            raise SpecsimError(f"{label}: field 'request_rate' is not a rate ({v!r})") from None
    if isinstance(v, bool) or not isinstance(v, int | float) or math.isnan(v) or v <= 0:
        raise SpecsimError(f"{label}: field 'request_rate' is not a positive rate ({v!r})")
    return float(v)


def _count(label: str, key: str, v: Any) -> int:
    x = _finite(label, key, v)
    if x < 0 or x != int(x):
        raise SpecsimError(f"{label}: field '{key}' is not a whole number ({v!r})")
    return int(x)


def _concurrency(label: str, v: Any) -> int | None:
    return None if v is None else _count(label, "max_concurrency", v)


def _completed(label: str, v: Any) -> int:
    n = _count(label, "completed", v)
    if n == 0:
        raise SpecsimError(f"{label}: no completed requests, so no per-request means")
    return n


_VLLM_FIELDS = ("completed", "total_input_tokens", "duration", "output_throughput", "mean_tpot_ms", "mean_ttft_ms",
         "request_rate")


def _vllm(label: str, d: dict[str, Any]) -> BenchRun:
    f = _need(label, d, _VLLM_FIELDS, "vllm bench serve")
    completed = _completed(label, d["completed"])
    out_tokens = (_finite(label, "total_output_tokens", d["total_output_tokens"])
                  if d.get("total_output_tokens") is not None else f["output_throughput"] * f["duration"])
    failed = _count(label, "failed", d["failed"]) if d.get("failed") is not None else 0
    num_prompts = (_count(label, "num_prompts", d["num_prompts"]) if d.get("num_prompts") is not None
                   else completed + failed)
    accept = d.get("spec_decode_acceptance_length")
    per_pos = d.get("spec_decode_per_position_acceptance_rates") or []
    spec = any(k.startswith("spec_decode_") for k in d)
    return BenchRun(
        path=label, client="vllm", concurrency=_concurrency(label, d.get("max_concurrency")),
        request_rate=_rate(label, d["request_rate"]), num_prompts=num_prompts, completed=completed,
        input_len_mean=f["total_input_tokens"] / completed, output_len_mean=out_tokens / completed,
        duration_s=f["duration"], output_tok_s=f["output_throughput"], tpot_mean_ms=f["mean_tpot_ms"],
        ttft_mean_ms=f["mean_ttft_ms"], itl_mean_ms=_optional(label, d, "mean_itl_ms"),
        model_id=_text(d.get("model_id")),
        acceptance_length=None if accept is None else _finite(label, "spec_decode_acceptance_length", accept),
        acceptance_per_position=tuple(_finite(label, "spec_decode_per_position_acceptance_rates", p)
                                      for p in per_pos),
        speculative=True if spec else None)


_SGLANG_FIELDS = ("completed", "total_input_tokens", "total_output_tokens", "duration", "output_throughput",
           "mean_tpot_ms", "mean_ttft_ms", "request_rate")


def _sglang(label: str, d: dict[str, Any]) -> BenchRun:
    f = _need(label, d, _SGLANG_FIELDS, "sglang.bench_serving")
    completed = _completed(label, d["completed"])
    details = _mapping(d, "details") or d
    sent = next((len(v) for k in ("errors", "input_lens") if isinstance(v := details.get(k), list)), None)
    info = _mapping(d, "server_info")
    accept = d.get("accept_length")
    if accept is not None:
        spec: bool | None = True
    elif info:
        spec = info.get("speculative_algorithm") not in (None, "", "NONE")
    else:
        spec = None
    return BenchRun(
        path=label, client="sglang", concurrency=_concurrency(label, d.get("max_concurrency")),
        request_rate=_rate(label, d["request_rate"]), num_prompts=sent if sent else completed,
        completed=completed, input_len_mean=f["total_input_tokens"] / completed,
        output_len_mean=f["total_output_tokens"] / completed, duration_s=f["duration"],
        output_tok_s=f["output_throughput"], tpot_mean_ms=f["mean_tpot_ms"], ttft_mean_ms=f["mean_ttft_ms"],
        itl_mean_ms=_optional(label, d, "mean_itl_ms"),
        model_id=_text(d.get("model_id")) or _text(info.get("model_path")),
        acceptance_length=None if accept is None else _finite(label, "accept_length", accept),
        speculative=spec)


def _mapping(d: dict[str, Any], key: str) -> dict[str, Any]:
    v = d.get(key)
    return v if isinstance(v, dict) else {}


def _optional(label: str, d: dict[str, Any], key: str) -> float | None:
    return None if d.get(key) is None else _finite(label, key, d[key])


def _text(v: Any) -> str | None:
    if isinstance(v, list):
        v = v[0] if v else None
    return v if isinstance(v, str) and v else None


_TIME_MS = {"ms": 1.0, "ns": 1e-6, "us": 1e-3, "s": 1e3, "sec": 1e3}


def _metric(label: str, d: dict[str, Any], key: str, to_ms: bool = False, default_unit: str = "ms") -> float | None:
    """``avg`` of an AIPerf/genai-perf metric object (latencies converted to ms); None when absent."""
    m = d.get(key)
    if m is None:
        return None
    if not isinstance(m, dict) or m.get("avg") is None:
        raise SpecsimError(f"{label}: metric '{key}' has no 'avg'")
    v = _finite(label, f"{key}.avg", m["avg"])
    if not to_ms:
        return v
    unit = str(m.get("unit", default_unit)).lower()
    if unit not in _TIME_MS:
        raise SpecsimError(f"{label}: metric '{key}' in unknown time unit {m.get('unit')!r}")
    return v * _TIME_MS[unit]


def _aiperf(label: str, d: dict[str, Any]) -> BenchRun:
    got = {k: _metric(label, d, k, to_ms=k == "time_to_first_token")
           for k in ("output_token_throughput", "time_to_first_token", "request_count", "input_sequence_length",
                     "output_sequence_length")}
    tpot = _metric(label, d, "time_per_output_token", to_ms=True) or _metric(label, d, "inter_token_latency",
                                                                            to_ms=True)
    if missing := [k for k, v in got.items() if v is None] + ([] if tpot else ["inter_token_latency"]):
        raise SpecsimError(f"{label}: AIPerf result missing metric(s) {', '.join(sorted(missing))}")
    completed = _completed(label, got["request_count"])
    duration_ms = _metric(label, d, "benchmark_duration", to_ms=True, default_unit="sec")
    if duration_ms is None:  # genai-perf records no duration: completed requests / request throughput
        if not (throughput := _metric(label, d, "request_throughput")):
            raise SpecsimError(f"{label}: AIPerf result missing metric(s) benchmark_duration, request_throughput")
        duration_ms = 1e3 * completed / throughput
    cfg = _mapping(d, "input_config")
    concurrency, rate, sent, model = _aiperf_load(label, cfg)
    errors = _metric(label, d, "error_request_count") or 0.0
    return BenchRun(
        path=label, client="aiperf", concurrency=concurrency, request_rate=rate,
        num_prompts=sent if sent is not None else completed + int(errors), completed=completed,
        input_len_mean=float(got["input_sequence_length"] or 0.0),
        output_len_mean=float(got["output_sequence_length"] or 0.0), duration_s=duration_ms / 1e3,
        output_tok_s=float(got["output_token_throughput"] or 0.0), tpot_mean_ms=float(tpot or 0.0),
        ttft_mean_ms=float(got["time_to_first_token"] or 0.0),
        itl_mean_ms=_metric(label, d, "inter_chunk_latency", to_ms=True), model_id=model)


def _aiperf_load(label: str, cfg: dict[str, Any]) -> tuple[int | None, float, int | None, str | None]:
    """(concurrency, request rate, requests sent, model) from AIPerf's or genai-perf's ``input_config``."""
    phases = [p for p in cfg.get("phases") or [] if isinstance(p, dict)]
    if phases:  # AIPerf >= 0.10 (schema 1.3)
        prof = next((p for p in phases if p.get("name") == "profiling"),
                    next((p for p in phases if not p.get("exclude_from_results")), phases[-1]))
        kind = str(prof.get("type", "concurrency"))
        conc = None if prof.get("concurrency") is None else _count(label, "concurrency", prof["concurrency"])
        if kind == "concurrency":
            rate = math.inf
            conc = conc or 1
        elif kind == "fixed_schedule":
            rate = math.nan
        else:
            rate = _rate(label, prof.get("rate"))
        sent = None if prof.get("requests") is None else _count(label, "requests", prof["requests"])
        items = _mapping(cfg, "models").get("items") or [{}]
        return conc, rate, sent, _text(items[0].get("name") if isinstance(items[0], dict) else None)
    load = _mapping(cfg, "loadgen") or cfg  # AIPerf 2025 | genai-perf
    conc = None if load.get("concurrency") is None else _count(label, "concurrency", load["concurrency"])
    rate = math.inf if load.get("request_rate") is None else _rate(label, load["request_rate"])
    if rate == math.inf and conc is None:
        conc = 1  # both tools default to one request in flight
    sent_v = load.get("request_count")
    sent = None if sent_v is None else _count(label, "request_count", sent_v)
    endpoint = _mapping(cfg, "endpoint")
    model = _text(endpoint.get("model_names")) or _text(cfg.get("model_names")) or _text(cfg.get("model"))
    return conc, rate, sent, model


# ----------------------------------------------------------------------------- server logs

_VLLM_V1 = re.compile(r"SpecDecoding metrics:(?P<body>.*)$")
_V1_MEAN = re.compile(r"Mean acceptance length: ([0-9.]+|nan)")
_V1_ACCEPTED = re.compile(r"Accepted: (\d+) tokens")
_V1_DRAFTED = re.compile(r"Drafted: (\d+) tokens")
_V1_PER_POS = re.compile(r"Per-position acceptance rate: ([0-9.nan, ]+?)(?:, [A-Z]|\s*$)")
_VLLM_V0 = re.compile(r"Speculative metrics: .*?Number of speculative tokens: (\d+), Number of accepted "
                      r"tokens: (\d+), Number of draft tokens: (\d+), Number of emitted tokens: (\d+)")
_SGLANG_LINE = re.compile(r"Decode batch\..*?#running-req: (\d+).*?accept len: ([0-9.]+)")


def read_server_log(path: str | Path) -> ServerAcceptance:
    """Speculative-decoding acceptance aggregated over the vLLM or SGLang log lines in a server log.

    vLLM V1 (counts per logging interval): mean length = 1 + sum(accepted) / sum(drafts), with
    drafts = draft tokens / k per line (k = the number of per-position rates printed; exact when
    every draft has k tokens, as EAGLE, MTP and draft models propose); per-position rates are the
    printed rates weighted by each line's drafts. vLLM V0 (cumulative counters, reset when a server
    restarts): emitted tokens / drafts over each server's last line. SGLang: the mean of the
    ``accept len`` values, weighted by ``#running-req``. Lines from servers with different k refuse.
    """
    name = str(path)
    lines = read_text(path).splitlines()
    v1 = [m["body"] for line in lines if (m := _VLLM_V1.search(line))]
    v0 = [tuple(int(g) for g in m.groups()) for line in lines if (m := _VLLM_V0.search(line))]
    sgl = [(int(m[1]), float(m[2])) for line in lines if (m := _SGLANG_LINE.search(line))]
    found = [kind for kind, rows in (("vllm", v1), ("vllm-v0", v0), ("sglang", sgl)) if rows]
    if not found:
        raise SpecsimError(f"{name}: no speculative-decoding lines (vLLM 'SpecDecoding metrics:' or "
                           "'Speculative metrics:', SGLang 'Decode batch. ... accept len:')")
    if len(found) > 1:
        raise SpecsimError(f"{name}: lines from more than one engine format ({', '.join(found)}); "
                           "give one server's log")
    if v1:
        return _vllm_v1(name, v1)
    if v0:
        return _vllm_v0(name, v0)
    return _sglang_log(name, sgl)


def _vllm_v1(name: str, bodies: list[str]) -> ServerAcceptance:
    accepted = drafts = 0.0
    weighted: list[float] = []
    ks: set[int] = set()
    used = 0
    for body in bodies:
        acc, drafted = _V1_ACCEPTED.search(body), _V1_DRAFTED.search(body)
        if acc is None or drafted is None or int(drafted[1]) == 0:
            continue  # an idle interval (or a line cut short)
        pos = _V1_PER_POS.search(body)
        if pos is None:
            raise SpecsimError(f"{name}: 'SpecDecoding metrics' lines print no per-position rates, so k and the "
                               "number of drafts (hence the mean acceptance length) are unknown")
        rates = [float(x) for x in pos[1].split(",") if x.strip()]
        ks.add(len(rates))
        if len(ks) > 1:
            raise SpecsimError(f"{name}: lines from servers with different k ({', '.join(map(str, sorted(ks)))}); "
                               "split the log per server run")
        n = int(drafted[1]) / len(rates)
        accepted += int(acc[1])
        drafts += n
        weighted = [w + r * n for w, r in zip(weighted or [0.0] * len(rates), rates, strict=True)]
        used += 1
    if drafts == 0:
        raise SpecsimError(f"{name}: every 'SpecDecoding metrics' line reports 0 drafted tokens")
    return ServerAcceptance("vllm", 1.0 + accepted / drafts, tuple(w / drafts for w in weighted), used,
                            round(drafts))


def _vllm_v0(name: str, rows: list[tuple[int, ...]]) -> ServerAcceptance:
    ks = {k for k, *_ in rows}
    if len(ks) > 1:
        raise SpecsimError(f"{name}: lines from servers with different k ({', '.join(map(str, sorted(ks)))}); "
                           "split the log per server run")
    k = ks.pop()
    drafts = emitted = 0.0
    for row, after in zip(rows, [*rows[1:], None], strict=True):
        if after is None or after[2] < row[2] or after[3] < row[3]:  # the last line of a server's counters
            drafts, emitted = drafts + row[2] / k, emitted + row[3]
    if drafts == 0 or k == 0:
        raise SpecsimError(f"{name}: every 'Speculative metrics' line reports 0 draft tokens")
    return ServerAcceptance("vllm", emitted / drafts, (), len(rows), round(drafts))


def _sglang_log(name: str, rows: list[tuple[int, float]]) -> ServerAcceptance:
    used = [(r, a) for r, a in rows if r > 0 and a >= 1.0]  # 0.00: no verify step in the interval
    weight = sum(r for r, _ in used)
    if not weight:
        raise SpecsimError(f"{name}: every 'Decode batch' line reports accept len below 1 or no running requests")
    return ServerAcceptance("sglang", sum(r * a for r, a in used) / weight, (), len(used), None)

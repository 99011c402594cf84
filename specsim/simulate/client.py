"""A simulation measured as a serving benchmark client measures it: one row per (configuration, load point), named
as `vllm bench serve`, `sglang.bench_serving` and ATOM's client print their results.

- output throughput = output tokens / benchmark duration (first send to last finish; simulate/metrics.py);
  per GPU: divided by the GPUs of one replica.
- TPOT per request = (e2e - TTFT) / (output tokens - 1), the first token excluded; mean, median, p99 over
  requests (np.percentile, linear), as every client computes it.
- ITL: the clients differ, so each figure says which (`ITL_DEFINITION`): `chunk` is the gap between two streamed
  chunks (speculation streams several tokens in one chunk: one sample per step a request is in), as vLLM's
  client (vllm/benchmarks/lib/endpoint_request_func.py: `output.itl.append(timestamp - most_recent_timestamp)`)
  and ATOM's (atom/benchmarks/backend_request_func.py, derived from vLLM's) record it; `token` divides a chunk's
  gap over the tokens in it and repeats it per token, as SGLang's client does with its own backend
  (python/sglang/benchmark/backends/sglang_client.py; with the OpenAI backends it records chunks).
- TTFT from the send (a closed-loop client's semaphore wait is not counted, as the clients start the clock
  after acquiring it).
- interactivity `per_user_tok_s` = 1000 / median TPOT (ms): InferenceMAX's `median_intvty`, the x axis of its
  throughput-per-GPU frontier (1 / x is monotone, so the median of per-request 1 / TPOT is the same figure).
- `acceptance_length`: mean tokens a decoding request receives per step, the bonus token included (vLLM's
  `spec_decode` mean acceptance length, SGLang's `accept_length`); 1 without speculation.

Every simulate output speaks this vocabulary (`LABELS`: the same quantity has the same name in a table, a CSV
column and a JSON key, its unit in the name): the clients' own columns (`CLIENT_COLUMNS`), then more of the
simulation's figures named the same way (`MORE_COLUMNS`: p90s, ITL p99 as `--percentile-metrics` adds it, e2e,
queueing). The simulator's raw figures (seconds, `sweep.metrics_row`: ttft_p50_s ...) follow them in a CSV or
JSON only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from specsim.errors import SpecsimError

if TYPE_CHECKING:
    from specsim.simulate.metrics import ServingMetrics

#: which ITL each client reports (module docstring)
ITL_DEFINITION = {"vllm": "chunk", "atom": "chunk", "sglang": "token"}
#: the columns of one load point, in the clients' names and the order `simulate -f csv` writes them
CLIENT_COLUMNS = ("output_tok_s", "output_tok_s_per_gpu", "request_per_s", "tpot_mean_ms", "tpot_median_ms",
                  "tpot_p99_ms", "itl_median_ms", "ttft_mean_ms", "ttft_median_ms", "ttft_p99_ms", "e2e_mean_ms",
                  "per_user_tok_s", "acceptance_length")
#: more of a run's figures in the clients' style (milliseconds; p50 is "median"), after the clients' own
MORE_COLUMNS = ("ttft_p90_ms", "tpot_p90_ms", "itl_p99_ms", "e2e_median_ms", "e2e_p99_ms", "queue_p99_ms")
#: each column as a table names it: (a terminal header on two lines, the one-line name of a row or Markdown header)
LABELS: dict[str, tuple[str, str]] = {
    "rate_rps": ("rate\nreq/s", "rate (req/s)"), "concurrency": ("concurrency", "concurrency"),
    "arrived_rps": ("arrived\nreq/s", "arrived (req/s)"),
    "output_tok_s": ("output\ntok/s", "output tok/s"), "output_tok_s_per_gpu": ("tok/s\nper GPU", "tok/s per GPU"),
    "request_per_s": ("req/s", "requests/s"), "per_user_tok_s": ("tok/s\nper user", "tok/s per user"),
    "ttft_mean_ms": ("TTFT\nmean ms", "TTFT mean (ms)"), "ttft_median_ms": ("TTFT\nmedian ms", "TTFT median (ms)"),
    "ttft_p90_ms": ("TTFT\np90 ms", "TTFT p90 (ms)"), "ttft_p99_ms": ("TTFT\np99 ms", "TTFT p99 (ms)"),
    "tpot_mean_ms": ("TPOT\nmean ms", "TPOT mean (ms)"), "tpot_median_ms": ("TPOT\nmedian ms", "TPOT median (ms)"),
    "tpot_p90_ms": ("TPOT\np90 ms", "TPOT p90 (ms)"), "tpot_p99_ms": ("TPOT\np99 ms", "TPOT p99 (ms)"),
    "itl_median_ms": ("ITL\nmedian ms", "ITL median (ms)"), "itl_p99_ms": ("ITL\np99 ms", "ITL p99 (ms)"),
    "e2e_mean_ms": ("e2e\nmean ms", "e2e mean (ms)"), "e2e_median_ms": ("e2e\nmedian ms", "e2e median (ms)"),
    "e2e_p99_ms": ("e2e\np99 ms", "e2e p99 (ms)"), "queue_p99_ms": ("queue\np99 ms", "queueing p99 (ms)"),
    "acceptance_length": ("accept\nlength", "accept length"), "throughput_ratio": ("x off", "x off"),
    "goodput_rps": ("goodput\nreq/s", "goodput (req/s in SLO)"),
    "cost_per_mtok_usd": ("$ per M\ntokens", "$ per M output tokens"),
    "requests": ("requests", "requests simulated"), "completed": ("completed", "requests completed"),
}


def itl_definition(client: str) -> str:
    if client not in ITL_DEFINITION:
        raise SpecsimError(f"--client must be one of {', '.join(ITL_DEFINITION)}, got {client!r}")
    return ITL_DEFINITION[client]


def client_columns(frame: pd.DataFrame, gpus: int, client: str = "vllm") -> pd.DataFrame:
    """The client's figures of each simulated row (`sweep.metrics_row` columns: seconds, per step) in its names
    and units (`CLIENT_COLUMNS`), the ITL definition the client uses (`itl_definition`), then `MORE_COLUMNS`."""
    if gpus < 1:
        raise SpecsimError(f"GPUs per replica must be >= 1, got {gpus}")
    itl = "itl_step" if itl_definition(client) == "chunk" else "itl_token"
    tpot_median_ms = frame["tpot_p50_s"].astype(float) * 1e3
    with np.errstate(divide="ignore", invalid="ignore"):
        per_user = np.where(tpot_median_ms > 0, 1e3 / tpot_median_ms, np.nan)
    def ms(column: str) -> pd.Series:
        return frame[column].astype(float) * 1e3

    out = pd.DataFrame({
        "output_tok_s": frame["output_tok_s"].astype(float),
        "output_tok_s_per_gpu": frame["output_tok_s"].astype(float) / gpus,
        "request_per_s": frame["requests_per_s"].astype(float),
        "tpot_mean_ms": ms("tpot_mean_s"),
        "tpot_median_ms": tpot_median_ms,
        "tpot_p99_ms": ms("tpot_p99_s"),
        "itl_median_ms": ms(f"{itl}_p50_s"),
        "ttft_mean_ms": ms("ttft_mean_s"),
        "ttft_median_ms": ms("ttft_p50_s"),
        "ttft_p99_ms": ms("ttft_p99_s"),
        "e2e_mean_ms": ms("e2e_mean_s"),
        "per_user_tok_s": per_user,
        "acceptance_length": frame["tokens_per_decode_step"].astype(float),
        "itl_definition": itl_definition(client),
        "ttft_p90_ms": ms("ttft_p90_s"), "tpot_p90_ms": ms("tpot_p90_s"), "itl_p99_ms": ms(f"{itl}_p99_s"),
        "e2e_median_ms": ms("e2e_p50_s"), "e2e_p99_ms": ms("e2e_p99_s"), "queue_p99_ms": ms("queue_p99_s"),
    }, index=frame.index)
    return out


def run_figures(m: ServingMetrics, gpus: int, client: str = "vllm") -> dict[str, float | str]:
    """One run's figures in the clients' vocabulary (`client_columns` of its `metrics_row`)."""
    from specsim.simulate.sweep import metrics_row

    row = client_columns(pd.DataFrame([metrics_row(m)]), gpus, client).iloc[0]
    return {str(k): (v if isinstance(v, str) else float(v)) for k, v in row.items()}

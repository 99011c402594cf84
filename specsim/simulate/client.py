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
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specsim.errors import SpecsimError

#: which ITL each client reports (module docstring)
ITL_DEFINITION = {"vllm": "chunk", "atom": "chunk", "sglang": "token"}
#: the columns of one load point, in the clients' names and the order `simulate -f csv` writes them
CLIENT_COLUMNS = ("output_tok_s", "output_tok_s_per_gpu", "request_per_s", "tpot_mean_ms", "tpot_median_ms",
                  "tpot_p99_ms", "itl_median_ms", "ttft_mean_ms", "ttft_median_ms", "ttft_p99_ms", "e2e_mean_ms",
                  "per_user_tok_s", "acceptance_length")


def itl_definition(client: str) -> str:
    if client not in ITL_DEFINITION:
        raise SpecsimError(f"--client must be one of {', '.join(ITL_DEFINITION)}, got {client!r}")
    return ITL_DEFINITION[client]


def client_columns(frame: pd.DataFrame, gpus: int, client: str = "vllm") -> pd.DataFrame:
    """The client's figures of each simulated row (`sweep.metrics_row` columns: seconds, per step) in its names
    and units, with the ITL definition the client uses (`itl_definition`)."""
    if gpus < 1:
        raise SpecsimError(f"GPUs per replica must be >= 1, got {gpus}")
    itl = "itl_step" if itl_definition(client) == "chunk" else "itl_token"
    ms = 1e3
    tpot_median_ms = frame["tpot_p50_s"].astype(float) * ms
    with np.errstate(divide="ignore", invalid="ignore"):
        per_user = np.where(tpot_median_ms > 0, 1e3 / tpot_median_ms, np.nan)
    out = pd.DataFrame({
        "output_tok_s": frame["output_tok_s"].astype(float),
        "output_tok_s_per_gpu": frame["output_tok_s"].astype(float) / gpus,
        "request_per_s": frame["requests_per_s"].astype(float),
        "tpot_mean_ms": frame["tpot_mean_s"].astype(float) * ms,
        "tpot_median_ms": tpot_median_ms,
        "tpot_p99_ms": frame["tpot_p99_s"].astype(float) * ms,
        "itl_median_ms": frame[f"{itl}_p50_s"].astype(float) * ms,
        "ttft_mean_ms": frame["ttft_mean_s"].astype(float) * ms,
        "ttft_median_ms": frame["ttft_p50_s"].astype(float) * ms,
        "ttft_p99_ms": frame["ttft_p99_s"].astype(float) * ms,
        "e2e_mean_ms": frame["e2e_mean_s"].astype(float) * ms,
        "per_user_tok_s": per_user,
        "acceptance_length": frame["tokens_per_decode_step"].astype(float),
    }, index=frame.index)
    out["itl_definition"] = itl_definition(client)
    return out

"""Measured acceptance: engine metrics (Prometheus text) and acceptance files -> AcceptanceProfile.

Engines and their conventions (all "mean acceptance length" figures include the bonus token, see
``specsim.acceptance.MEAN_LENGTH_CONVENTION``):

* vLLM (``vllm/v1/spec_decode/metrics.py``): counters ``vllm:spec_decode_num_drafts``,
  ``..._num_draft_tokens``, ``..._num_accepted_tokens`` and
  ``..._num_accepted_tokens_per_pos{position="i"}`` (exposed with a ``_total`` suffix).
  mean acceptance length = 1 + accepted / drafts; "acceptance rate" = accepted / draft_tokens
  (that is E[A]/k, *not* alpha); per-position rate = accepted_per_pos / drafts, which is
  *unconditional* (P(draft i accepted)) and is turned into conditional rates here.
* SGLang: gauge ``sglang:spec_accept_length`` = (accepted drafts + one bonus per forward) /
  forwards. Only a mean: a chain profile needs k (``sglang:spec_num_steps`` if the scrape has it,
  else the caller's k); the result is the i.i.d. alpha that reproduces that mean at that k.
* TensorRT-LLM: per-position counters ``trtllm_spec_decode_drafted_tokens_total`` and
  ``..._accepted_tokens_total`` labelled ``token_position`` (P(draft i accepted) = accepted_i /
  drafted_i, unconditional like vLLM's), else the gauge ``trtllm_spec_decode_acceptance_length`` with
  the counters ``..._num_draft_tokens_total`` / ``..._num_accepted_tokens_total`` (their ratio gives k).
* SGLang's ``sglang:spec_accept_rate`` (accepted / proposed drafts) gives k = (length - 1) / rate.

A window: ``read_metrics_window(before, after)`` differences the counters of two scrapes, so only
the traffic between them counts (SGLang's gauges are already interval means: read from ``after``).

Counters repeated under several label sets (engines, data-parallel ranks, models) are summed;
gauges are averaged (they are already means).

Acceptance files (``load_acceptance`` dispatches on content): a Prometheus scrape as above; a CSV
with header ``accepted_drafts,count`` (0..K accepted drafts per step, bonus not counted) or
``tokens_per_step,count`` (1..K+1); or a YAML/JSON mapping with one of ``alpha``, ``alphas``
(conditional per-position), ``unconditional`` (vLLM-style per-position), ``accepted_drafts`` or
``tokens_per_step`` (histograms, a list indexed from 0 / 1 or a mapping), or ``mean_length`` with
``k``.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specsim.acceptance.chain import AcceptanceProfile
from specsim.errors import SpecsimError

_SAMPLE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)"
    r"(?:\{(?P<labels>.*)\})?"
    r"\s+(?P<value>\S+)(?:\s+\S+)?\s*$"
)
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')

VLLM_DRAFTS = "vllm:spec_decode_num_drafts"
VLLM_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
VLLM_ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
VLLM_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
SGLANG_LENGTH = "sglang:spec_accept_length"
SGLANG_STEPS = "sglang:spec_num_steps"
SGLANG_RATE = "sglang:spec_accept_rate"  # accepted drafts / proposed drafts (sglang metrics/collector.py)
TRTLLM_LENGTH = "trtllm_spec_decode_acceptance_length"
TRTLLM_DRAFT_TOKENS = "trtllm_spec_decode_num_draft_tokens"  # counters, aggregate over positions
TRTLLM_ACCEPTED_TOKENS = "trtllm_spec_decode_num_accepted_tokens"
TRTLLM_POS_DRAFTED = "trtllm_spec_decode_drafted_tokens"  # counters with a token_position label
TRTLLM_POS_ACCEPTED = "trtllm_spec_decode_accepted_tokens"
EXPECTED = (f"{VLLM_DRAFTS} + {VLLM_ACCEPTED}, {TRTLLM_POS_DRAFTED}_total per token_position, {SGLANG_LENGTH} or "
            f"{TRTLLM_LENGTH}")


@dataclass(frozen=True)
class Sample:
    """One line of a Prometheus text exposition."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    def label(self, key: str) -> str | None:
        return dict(self.labels).get(key)


def _unescape(value: str) -> str:
    """Label values escape backslash, double quote and newline (Prometheus text format)."""
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def parse_prometheus(text: str) -> list[Sample]:
    """Parse Prometheus text exposition format into samples (comments and blank lines skipped)."""
    out: list[Sample] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        try:
            value = float(m.group("value"))
        except ValueError:
            continue
        labels = tuple((k, _unescape(v)) for k, v in _LABEL.findall(m.group("labels") or ""))
        out.append(Sample(m.group("name"), labels, value))
    return out


def _series(samples: list[Sample], base: str) -> list[Sample]:
    """Samples of a counter/gauge by base name: the ``_total`` series if present, else the bare name.

    (``_created`` timestamps are never matched; a file holding both spellings is not double-counted.)
    """
    total = [s for s in samples if s.name == base + "_total"]
    return total or [s for s in samples if s.name == base]


@dataclass(frozen=True)
class MetricsReading:
    """What an engine's /metrics scrape says about acceptance."""

    engine: str
    mean_length: float
    k: int | None = None
    unconditional_rates: tuple[float, ...] | None = None
    num_drafts: float | None = None
    draft_acceptance_rate: float | None = None
    source: str = ""
    k_inferred: int | None = None  # k = (length - 1) / (accepted / drafted): used when no k is counted or given

    @property
    def convention(self) -> str:
        return "mean acceptance length includes the bonus token (1 + accepted drafts per step)"

    def profile(self, k: int | None = None) -> AcceptanceProfile:
        """An acceptance profile: per-position rates when measured, else an i.i.d. fit to the mean.

        ``k`` is only used (and needed) when the scrape gives a mean without per-position data and
        without its own draft length.
        """
        where = self.source or self.engine
        if self.unconditional_rates:
            return AcceptanceProfile.from_unconditional(
                self.unconditional_rates, f"{where} (per-position, {self.engine})"
            )
        kk = self.k if self.k is not None else k if k is not None else self.k_inferred
        if kk is None:
            raise SpecsimError(
                f"{where}: {self.engine} gives only a mean acceptance length "
                f"({self.mean_length:.3f}); pass --k (the engine's draft length) to fit alpha"
            )
        try:
            return AcceptanceProfile.from_mean_length(
                self.mean_length, kk, f"{where} (mean length {self.mean_length:.3f} at k={kk})"
            )
        except SpecsimError as exc:
            raise SpecsimError(f"{where}: {exc}") from None


def _check_samples(samples: list[Sample], source: str) -> None:
    for smp in samples:
        if smp.name.startswith(("vllm:spec_decode", "sglang:spec", "trtllm_spec")) and not (
                math.isfinite(smp.value) and smp.value >= 0):
            raise SpecsimError(f"{source}: {smp.name} is {smp.value:g}; expected a finite number >= 0")


def read_metrics(text: str, source: str = "metrics") -> MetricsReading:
    """Turn a Prometheus scrape into a ``MetricsReading`` (vLLM counters preferred, then TRT-LLM's
    per-position counters, then SGLang's and TRT-LLM's gauges). Cumulative since the engine started;
    ``read_metrics_window`` measures a window between two scrapes."""
    samples = parse_prometheus(text)
    _check_samples(samples, source)
    return reading_from_samples(samples, source)


def _is_counter(name: str) -> bool:
    return name.endswith("_total") or name in (VLLM_DRAFTS, VLLM_DRAFT_TOKENS, VLLM_ACCEPTED, VLLM_PER_POS)


def window_samples(before: list[Sample], after: list[Sample], source: str = "window") -> list[Sample]:
    """Counters as ``after - before`` per series (name and labels); gauges as ``after`` (they are already
    means over the engine's last logging interval). A counter that went down was reset (an engine
    restart): the window is refused rather than guessed."""
    prior = {(s.name, s.labels): s.value for s in before}
    out = []
    for s in after:
        if _is_counter(s.name):
            v = s.value - prior.get((s.name, s.labels), 0.0)
            if v < -1e-9:
                raise SpecsimError(f"{source}: counter {s.name}{dict(s.labels)} went down between the scrapes "
                                   f"({prior[(s.name, s.labels)]:g} -> {s.value:g}): the engine restarted; "
                                   "scrape again")
            out.append(Sample(s.name, s.labels, max(v, 0.0)))
        else:
            out.append(s)
    return out


def read_metrics_window(before: str, after: str, source: str = "window") -> MetricsReading:
    """Acceptance over the window between two scrapes of the same engine's /metrics (before, after):
    the counters' differences, so traffic before the window (warm-up, other workloads) does not count.
    SGLang exposes gauges only (means over its last logging interval): those are read from ``after``."""
    b, a = parse_prometheus(before), parse_prometheus(after)
    _check_samples(b, f"{source} (before)")
    _check_samples(a, f"{source} (after)")
    reading = reading_from_samples(window_samples(b, a, source), source)
    return reading


def load_metrics_window(before: str | Path, after: str | Path) -> MetricsReading:
    """``read_metrics_window`` of two scrape files."""
    from specsim.files import read_text

    pb, pa = Path(before), Path(after)
    return read_metrics_window(read_text(pb), read_text(pa), f"{pb} -> {pa}")


def reading_from_samples(samples: list[Sample], source: str) -> MetricsReading:
    """A ``MetricsReading`` from parsed samples (one scrape, or a window's differences)."""
    drafts = _series(samples, VLLM_DRAFTS)
    accepted = _series(samples, VLLM_ACCEPTED)
    if drafts and accepted:
        n_drafts = sum(s.value for s in drafts)
        n_accepted = sum(s.value for s in accepted)
        if n_drafts <= 0:
            raise SpecsimError(f"{source}: {VLLM_DRAFTS} is 0 (no drafts recorded yet)")
        draft_tokens = _series(samples, VLLM_DRAFT_TOKENS)
        n_draft_tokens = sum(s.value for s in draft_tokens) if draft_tokens else None
        k = round(n_draft_tokens / n_drafts) if n_draft_tokens else None
        per_pos: dict[int, float] = defaultdict(float)
        for s in _series(samples, VLLM_PER_POS):
            pos = s.label("position")
            if pos is None or not pos.isdigit():
                raise SpecsimError(f"{source}: {VLLM_PER_POS} sample without a numeric position label")
            per_pos[int(pos)] += s.value
        rates = None
        if per_pos:
            K = max(per_pos) + 1
            rates = tuple(min(1.0, per_pos.get(i, 0.0) / n_drafts) for i in range(K))
        return MetricsReading(
            engine="vllm",
            mean_length=1.0 + n_accepted / n_drafts,  # vLLM: "includes the bonus token"
            k=k if rates is None else len(rates),
            unconditional_rates=rates,
            num_drafts=n_drafts,
            draft_acceptance_rate=(n_accepted / n_draft_tokens) if n_draft_tokens else None,
            source=source,
        )
    trt = _trtllm_per_position(samples, source)
    if trt is not None:
        return trt
    for engine, name in (("sglang", SGLANG_LENGTH), ("trtllm", TRTLLM_LENGTH)):
        gauges = _series(samples, name)
        if gauges:
            mean = sum(s.value for s in gauges) / len(gauges)
            steps = _series(samples, SGLANG_STEPS) if engine == "sglang" else []
            k = round(max(s.value for s in steps)) if steps else None
            if not mean >= 1.0:
                raise SpecsimError(
                    f"{source}: {name} = {mean:g}; a mean acceptance length is >= 1 (it includes the bonus token)"
                )
            rate = _draft_rate(samples, engine)
            # accepted / drafted = (L - 1) / k for a chain, so k = (L - 1) / rate
            inferred = max(1, round((mean - 1.0) / rate)) if rate and mean > 1.0 else None
            return MetricsReading(engine=engine, mean_length=mean, k=k, draft_acceptance_rate=rate, source=source,
                                  k_inferred=inferred)
    raise SpecsimError(f"{source}: no speculative-decoding metrics found (expected {EXPECTED})")


def _draft_rate(samples: list[Sample], engine: str) -> float | None:
    """accepted / drafted tokens: SGLang's gauge sglang:spec_accept_rate, TRT-LLM's two counters."""
    if engine == "sglang":
        rates = _series(samples, SGLANG_RATE)
        return sum(s.value for s in rates) / len(rates) if rates else None
    drafted = sum(s.value for s in _series(samples, TRTLLM_DRAFT_TOKENS))
    accepted = sum(s.value for s in _series(samples, TRTLLM_ACCEPTED_TOKENS))
    return accepted / drafted if drafted > 0 else None


def _trtllm_per_position(samples: list[Sample], source: str) -> MetricsReading | None:
    """TensorRT-LLM's per-position counters (``..._drafted_tokens_total`` / ``..._accepted_tokens_total``
    with a ``token_position`` label): P(draft i accepted) = accepted_i / drafted_i, positions in order;
    the steps are the drafts at the first position, so the mean length is 1 + sum of those rates."""
    drafted: dict[int, float] = defaultdict(float)
    accepted: dict[int, float] = defaultdict(float)
    for name, into in ((TRTLLM_POS_DRAFTED, drafted), (TRTLLM_POS_ACCEPTED, accepted)):
        for smp in _series(samples, name):
            pos = smp.label("token_position")
            if pos is None:
                continue
            if not pos.isdigit():
                raise SpecsimError(f"{source}: {name} sample with a non-numeric token_position {pos!r}")
            into[int(pos)] += smp.value
    if not drafted:
        return None
    positions = sorted(drafted)
    if drafted[positions[0]] <= 0:
        raise SpecsimError(f"{source}: {TRTLLM_POS_DRAFTED} is 0 at the first position (no drafts recorded)")
    rates = tuple(min(1.0, accepted.get(p, 0.0) / drafted[p]) if drafted[p] > 0 else 0.0 for p in positions)
    return MetricsReading(engine="trtllm", mean_length=1.0 + sum(rates), k=len(rates), unconditional_rates=rates,
                          num_drafts=drafted[positions[0]], draft_acceptance_rate=_draft_rate(samples, "trtllm"),
                          source=source)


def load_metrics(path: str | Path) -> MetricsReading:
    """Read a Prometheus text file (a scrape of ``/metrics``)."""
    p = Path(path)
    if not p.is_file():
        raise SpecsimError(f"{p}: no such file")
    return read_metrics(p.read_text(encoding="utf-8", errors="replace"), str(p))


# ---------------------------------------------------------------------------------------------
# acceptance files
# ---------------------------------------------------------------------------------------------


def _looks_like_prometheus(text: str) -> bool:
    return bool(re.search(r"^(# (TYPE|HELP) |vllm:|sglang:|trtllm_)", text, re.M))


def _histogram_from(value: Any, offset: int, where: str) -> dict[int, float]:
    """A histogram as {accepted drafts: count}; ``offset`` 1 for tokens-per-step keys."""
    if isinstance(value, list):
        items = [(i + offset, v) for i, v in enumerate(value)]
    elif isinstance(value, dict):
        items = list(value.items())
    else:
        raise SpecsimError(f"{where}: histogram must be a list or a mapping of counts")
    out: dict[int, float] = {}
    for key, count in items:
        try:
            a = int(key) - offset
            c = float(count)
        except (TypeError, ValueError):
            raise SpecsimError(f"{where}: bad histogram entry {key!r}: {count!r}") from None
        if a < 0:
            raise SpecsimError(f"{where}: histogram key {key} is below {offset}")
        out[a] = out.get(a, 0.0) + c
    return out


def _profile_from_csv(text: str, where: str) -> AcceptanceProfile:
    rows = list(csv.reader(io.StringIO(text)))
    rows = [r for r in rows if r and any(cell.strip() for cell in r)]
    if not rows:
        raise SpecsimError(f"{where}: empty CSV")
    header = [h.strip().lower() for h in rows[0]]
    if len(header) < 2 or header[0] not in ("accepted_drafts", "tokens_per_step") or header[1] != "count":
        raise SpecsimError(f"{where}: CSV header must be 'accepted_drafts,count' or 'tokens_per_step,count'")
    offset = 0 if header[0] == "accepted_drafts" else 1
    hist = _histogram_from({r[0].strip(): r[1].strip() for r in rows[1:]}, offset, where)
    return AcceptanceProfile.from_histogram(hist, f"{where} (histogram)")


def _profile_from_mapping(data: dict[str, Any], where: str, k: int | None) -> AcceptanceProfile:
    if "alpha" in data:
        return AcceptanceProfile.from_alpha(float(data["alpha"]))
    if "alphas" in data:
        return AcceptanceProfile.from_alphas([float(a) for a in data["alphas"]])
    if "unconditional" in data:
        return AcceptanceProfile.from_unconditional([float(a) for a in data["unconditional"]], where)
    if "accepted_drafts" in data:
        hist = _histogram_from(data["accepted_drafts"], 0, where)
        return AcceptanceProfile.from_histogram(hist, f"{where} (histogram)")
    if "tokens_per_step" in data:
        hist = _histogram_from(data["tokens_per_step"], 1, where)
        return AcceptanceProfile.from_histogram(hist, f"{where} (histogram)")
    if "mean_length" in data:
        kk = data.get("k", k)
        if kk is None:
            raise SpecsimError(f"{where}: 'mean_length' needs 'k' (in the file or --k)")
        return AcceptanceProfile.from_mean_length(float(data["mean_length"]), int(kk), where)
    raise SpecsimError(
        f"{where}: no acceptance found (expected one of alpha, alphas, unconditional, "
        "accepted_drafts, tokens_per_step, mean_length)"
    )


def load_acceptance(path: str | Path, k: int | None = None) -> AcceptanceProfile:
    """An AcceptanceProfile from a file: Prometheus scrape, histogram CSV, or YAML/JSON mapping."""

    from specsim.files import load_structured, read_text
    from specsim.structured import is_blank, kind_of

    p = Path(path)
    text = read_text(p)  # refuses folders, devices, binary and non-UTF-8 files
    where = str(p)
    if is_blank(text):
        raise SpecsimError(f"{where}: empty")
    try:
        if _looks_like_prometheus(text):
            return read_metrics(text, where).profile(k)
        if p.suffix.lower() == ".csv":
            return _profile_from_csv(text, where)
        data = load_structured(text, where, "json" if p.suffix.lower() == ".json" else "yaml")
        if not isinstance(data, dict):
            raise SpecsimError(
                f"no speculative-decoding metrics or acceptance mapping found, got {kind_of(data)} (expected "
                f"{EXPECTED}, a histogram CSV, or a YAML/JSON mapping)"
            )
        return _profile_from_mapping(data, where, k)
    except SpecsimError as exc:
        msg = str(exc)
        raise SpecsimError(msg if msg.startswith(where) else f"{where}: {msg}") from None
    except (TypeError, ValueError) as exc:
        raise SpecsimError(f"{where}: bad acceptance data: {exc}") from None

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
* TensorRT-LLM: gauge ``trtllm_spec_decode_acceptance_length``, a mean acceptance length; handled
  like SGLang's.

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
import json
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
TRTLLM_LENGTH = "trtllm_spec_decode_acceptance_length"
EXPECTED = f"{VLLM_DRAFTS} + {VLLM_ACCEPTED}, {SGLANG_LENGTH} or {TRTLLM_LENGTH}"


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
        kk = self.k if self.k is not None else k
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


def read_metrics(text: str, source: str = "metrics") -> MetricsReading:
    """Turn a Prometheus scrape into a ``MetricsReading`` (vLLM counters preferred, then SGLang, TRT-LLM)."""
    samples = parse_prometheus(text)
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
            return MetricsReading(engine=engine, mean_length=mean, k=k, source=source)
    raise SpecsimError(f"{source}: no speculative-decoding metrics found (expected {EXPECTED})")


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
    import yaml

    p = Path(path)
    if not p.is_file():
        raise SpecsimError(f"{p}: no such file")
    text = p.read_text(encoding="utf-8", errors="replace")
    where = str(p)
    try:
        if _looks_like_prometheus(text):
            return read_metrics(text, where).profile(k)
        if p.suffix.lower() == ".csv":
            return _profile_from_csv(text, where)
        try:
            data = json.loads(text) if p.suffix.lower() == ".json" else yaml.safe_load(text)
        except (yaml.YAMLError, json.JSONDecodeError) as exc:
            raise SpecsimError(f"not valid YAML/JSON: {str(exc).splitlines()[0]}") from None
        if not isinstance(data, dict):
            raise SpecsimError(
                f"no speculative-decoding metrics or acceptance mapping found (expected {EXPECTED}, "
                "a histogram CSV, or a YAML/JSON mapping)"
            )
        return _profile_from_mapping(data, where, k)
    except SpecsimError as exc:
        msg = str(exc)
        raise SpecsimError(msg if msg.startswith(where) else f"{where}: {msg}") from None
    except (TypeError, ValueError) as exc:
        raise SpecsimError(f"{where}: bad acceptance data: {exc}") from None

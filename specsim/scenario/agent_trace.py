"""Multi-turn / prefix-block request traces (the Mooncake JSONL format), with the prompt prefix each
request shares with earlier ones.

Format (github.com/kvcache-ai/Mooncake, FAST25-release/README.md, "Trace Format"): one JSON object per
line, ``{"timestamp": ms, "input_length": tokens, "output_length": tokens, "hash_ids": [...]}``; each
hash id names one prompt block of ``block_tokens`` tokens (512 in Mooncake's traces), identical ids
meaning reusable prefix KV blocks. ``hash_ids`` may be absent (nothing shared). An optional
``session_id`` (string or integer; NVIDIA AIPerf's multi-turn extension of the format) groups the turns
of one session.

Shared prefix: a request's cached prefix is its longest run of leading blocks whose whole prefix of ids
(``hash_ids[0..i]``) appeared, in that order, at the start of an earlier request — a prefix trie, so a
block id reused under a different parent does not count. Tokens: ``min(blocks * block_tokens,
input_length)`` (the last block of a prompt may be partial). Requests are taken in file order, which
must be arrival order (timestamps non-decreasing); an infinite cache is assumed (no eviction), as in
the theoretical hit rates quoted for these traces.

vLLM's benchmarks/multi_turn conversation files carry text, not token counts (a tokenizer would be
needed), so they are not read here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from specsim.errors import SpecsimError
from specsim.files import read_text

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Mooncake's block size (FAST25-release/README.md: "The block size is 512 tokens").
MOONCAKE_BLOCK_TOKENS = 512
NO_SESSION = -1


@dataclass(frozen=True, eq=False)
class AgentTrace:
    """Requests in arrival order. ``arrival_s`` counts from the first request; ``session`` holds an index
    into ``session_ids`` (``NO_SESSION`` = -1 where the row names none)."""

    source: str
    block_tokens: int
    arrival_s: FloatArray
    prompt_tokens: IntArray
    output_tokens: IntArray
    shared_prefix_tokens: IntArray
    session: IntArray
    session_ids: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        n = len(self.arrival_s)
        arrays = (self.arrival_s, self.prompt_tokens, self.output_tokens, self.shared_prefix_tokens, self.session)
        if any(a.ndim != 1 or len(a) != n for a in arrays):
            raise SpecsimError(f"{self.source}: agent trace arrays must be 1-D and of one length")
        if self.block_tokens < 1:
            raise SpecsimError(f"{self.source}: block_tokens must be >= 1, got {self.block_tokens}")
        if n and (not np.all(np.isfinite(self.arrival_s)) or np.any(np.diff(self.arrival_s) < 0)):
            raise SpecsimError(f"{self.source}: arrival times must be finite and non-decreasing")
        if np.any(self.prompt_tokens < 1) or np.any(self.output_tokens < 0):
            raise SpecsimError(f"{self.source}: prompt tokens must be >= 1 and output tokens >= 0")
        if np.any(self.shared_prefix_tokens < 0) or np.any(self.shared_prefix_tokens > self.prompt_tokens):
            raise SpecsimError(f"{self.source}: shared prefix tokens must lie in [0, prompt tokens]")
        if np.any((self.session < NO_SESSION) | (self.session >= len(self.session_ids))):
            raise SpecsimError(f"{self.source}: session indices must name an entry of session_ids or be -1")

    @property
    def n(self) -> int:
        return len(self.arrival_s)

    @property
    def new_prompt_tokens(self) -> IntArray:
        """Prompt tokens that are not a shared prefix (what a prefix cache still has to prefill)."""
        return self.prompt_tokens - self.shared_prefix_tokens

    def cached_fraction(self) -> float:
        """Shared prefix tokens over all prompt tokens (the trace's theoretical prefix-cache hit rate)."""
        total = int(self.prompt_tokens.sum())
        return float(self.shared_prefix_tokens.sum()) / total if total else 0.0


def shared_prefix_blocks(hash_rows: Sequence[Sequence[int]]) -> IntArray:
    """Per row, the number of leading blocks whose whole id prefix began an earlier row (a prefix trie)."""
    children: dict[tuple[int, int], int] = {}
    out = np.zeros(len(hash_rows), dtype=np.int64)
    for r, ids in enumerate(hash_rows):
        node, matched, extending = 0, 0, True
        for h in ids:
            key = (node, int(h))
            nxt = children.get(key)
            if nxt is None:
                extending = False
                nxt = children[key] = len(children) + 1
            elif extending:
                matched += 1
            node = nxt
        out[r] = matched
    return out


def shared_prefix_tokens(hash_rows: Sequence[Sequence[int]], prompt_tokens: IntArray,
                         block_tokens: int = MOONCAKE_BLOCK_TOKENS) -> IntArray:
    """Shared prefix in tokens: matched blocks times the block size, at most the prompt."""
    blocks = shared_prefix_blocks(hash_rows)
    return np.minimum(blocks * int(block_tokens), np.asarray(prompt_tokens, dtype=np.int64))


def _fail(path: str, line: int, what: str) -> SpecsimError:
    return SpecsimError(f"{path}:{line}: {what}")


def _integer(row: dict[str, Any], key: str, path: str, line: int, low: int) -> int:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value != int(value) or value < low:
        raise _fail(path, line, f"field '{key}' must be an integer >= {low}, got {value!r}")
    return int(value)


def _hash_ids(row: dict[str, Any], path: str, line: int) -> list[int]:
    ids = row.get("hash_ids", [])
    if not isinstance(ids, list) or any(isinstance(h, bool) or not isinstance(h, int) for h in ids):
        raise _fail(path, line, f"field 'hash_ids' must be a list of integers, got {str(ids)[:60]!r}")
    return ids


def _row(text: str, path: str, line: int) -> dict[str, Any]:
    try:
        row = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(path, line, f"not a JSON object ({exc.msg})") from None
    if not isinstance(row, dict):
        raise _fail(path, line, f"not a JSON object, got {type(row).__name__}")
    return row


@dataclass
class _Rows:
    time_ms: list[float] = field(default_factory=list)
    prompt: list[int] = field(default_factory=list)
    output: list[int] = field(default_factory=list)
    hashes: list[list[int]] = field(default_factory=list)
    session: list[int] = field(default_factory=list)
    session_index: dict[str, int] = field(default_factory=dict)

    def add(self, row: dict[str, Any], path: str, line: int) -> None:
        t = row.get("timestamp")
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
            raise _fail(path, line, f"field 'timestamp' must be milliseconds >= 0, got {t!r}")
        if self.time_ms and t < self.time_ms[-1]:
            raise _fail(path, line, f"timestamp {t} is before the previous row's {self.time_ms[-1]} (rows must be in "
                        "arrival order)")
        self.time_ms.append(float(t))
        self.prompt.append(_integer(row, "input_length", path, line, 1))
        self.output.append(_integer(row, "output_length", path, line, 0))
        self.hashes.append(_hash_ids(row, path, line))
        sid = row.get("session_id")
        if sid is None:
            self.session.append(NO_SESSION)
        elif isinstance(sid, (str, int)) and not isinstance(sid, bool):
            self.session.append(self.session_index.setdefault(str(sid), len(self.session_index)))
        else:
            raise _fail(path, line, f"field 'session_id' must be a string or an integer, got {sid!r}")


def read_agent_trace(path: str | Path, block_tokens: int = MOONCAKE_BLOCK_TOKENS) -> AgentTrace:
    """Read a Mooncake-format JSONL trace (blank lines skipped); a malformed row raises a one-line
    SpecsimError naming the file and the line."""
    if block_tokens < 1:
        raise SpecsimError(f"block_tokens must be >= 1, got {block_tokens}")
    where = str(path)
    rows = _Rows()
    for line, text in enumerate(read_text(path).splitlines(), start=1):
        if text.strip():
            rows.add(_row(text, where, line), where, line)
    if not rows.prompt:
        raise SpecsimError(f"{where}: the agent trace has no requests")
    times = np.asarray(rows.time_ms, dtype=np.float64) / 1000.0
    prompt = np.asarray(rows.prompt, dtype=np.int64)
    return AgentTrace(
        source=where, block_tokens=int(block_tokens), arrival_s=times - times[0], prompt_tokens=prompt,
        output_tokens=np.asarray(rows.output, dtype=np.int64),
        shared_prefix_tokens=shared_prefix_tokens(rows.hashes, prompt, block_tokens),
        session=np.asarray(rows.session, dtype=np.int64), session_ids=tuple(rows.session_index))

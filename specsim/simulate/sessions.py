"""Cached prefixes and multi-turn sessions in the event loop (see `engine.simulate`).

Prefix cache (`PrefixCache`), vLLM's automatic prefix caching as docs/design/prefix_caching.md and
v1/core/kv_cache_manager.py describe it (research/serving-2026.md, V-APC, V-KVM):
- only whole blocks of `block_tokens` are cached; a lookup is capped at the prompt's tokens - 1, so a fully cached
  prompt still computes its last block: hit = floor(min(cached, prompt - 1) / B) * B; a draft that reads the
  target's hidden states (EAGLE, MTP) drops one more matched block (`drop_blocks`);
- a finished request's blocks stay cached in the free queue, least recently used evicted first when blocks are
  allocated. Here a session's context (its prompt and output) is one entry; an entry survives while the entries
  used more recently than it and the KV held by running requests fit the KV cache. Eviction is evaluated at each
  admission, against the KV held then (a peak of running KV between two admissions that would have evicted an
  entry is not seen);
- an evicted entry moves to the host tier when one is configured (CPU offload, LMCache), least recently used
  dropped beyond its capacity; a hit there reloads the tokens over the host link: hit tokens x KV bytes per token /
  the link's bandwidth (serving-2026.md section 3, "derived"), added to the step that admits it (a synchronous
  load, as vLLM's connector loads before the forward; overlap with compute is not modelled).
A request's own cached tokens (`Requests.cached_tokens`: a warmed benchmark, a shared system prompt) hit without
an entry. SGLang's radix cache is the same at block 1 (`--page-size 1`).

Sessions (`Sessions`): a request with a session id continues the session's previous request (its prompt holds the
whole context so far); it is sent `think_s` after the previous one finishes. A session's first request is sent at
its arrival (open loop) or, with `Requests.concurrency` N, by one of N clients, each running one session at a
time (a client takes the next session when its session's last request finishes, as AgentX's and vLLM's multi-turn
clients do). The event loop's slots are filled in send order, so its arrival list stays sorted; pending sends are
held in a heap and placed in slots when the loop's clock reaches them.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from specsim.scenario.traffic import Requests

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
INF = float("inf")


@dataclass
class PrefixCache:
    """Sessions' cached contexts on the GPU (least recently used first) and in the host tier (module docstring)."""

    capacity_tokens: int  # the GPU KV cache
    block_tokens: int = 16
    drop_blocks: int = 0  # EAGLE / MTP drop the last matched block
    host_tokens: int = 0  # the host tier's capacity (0: none)
    reload_s_per_token: float = 0.0
    gpu: OrderedDict[int, int] = field(default_factory=OrderedDict)
    host: OrderedDict[int, int] = field(default_factory=OrderedDict)
    hit_tokens: list[int] = field(default_factory=lambda: [0, 0])  # from the GPU, from the host
    reload_s: float = 0.0  # seconds spent reloading from the host tier

    def usable(self, cached: int, target: int) -> int:
        """The tokens of a `target`-token prefill served from `cached` cached tokens (module docstring)."""
        b = self.block_tokens
        return max(0, (min(cached, target - 1) // b - self.drop_blocks) * b)

    def _resident(self, session: int, held: int) -> int:
        """The session's tokens on the GPU if its entry survives eviction with `held` KV tokens in use, else 0."""
        if session not in self.gpu:
            return 0
        room = self.capacity_tokens - held
        for key in reversed(self.gpu):  # most recent first
            room -= self.gpu[key]
            if room < 0:
                return 0
            if key == session:
                return self.gpu[key]
        return 0  # unreachable

    def peek(self, session: int, held: int, target: int) -> int:
        """The hit a `target`-token prefill of the session would get now (nothing is changed)."""
        if session < 0:
            return 0
        cached = self._resident(session, held) or self.host.get(session, 0)
        return self.usable(cached, target)

    def claim(self, session: int, held: int, target: int, alloc: int, hit: int) -> tuple[int, float]:
        """Admit a prefill that `peek` (or its own cached tokens) gave `hit` tokens: the session's entry leaves the
        cache (the request holds it now), the part of the hit found only in the host tier is reloaded (seconds
        returned), and the other entries are evicted to fit `held` + the hit + `alloc` new tokens."""
        from_host = 0
        if session >= 0:
            on_gpu = self.usable(self._resident(session, held), target)
            self.gpu.pop(session, None)
            if self.host.pop(session, None) is not None:
                from_host = max(0, hit - on_gpu)
        reload = from_host * self.reload_s_per_token
        self.reload_s += reload
        self.hit_tokens[0] += hit - from_host
        self.hit_tokens[1] += from_host
        self._evict(held + hit + alloc)
        return hit, reload

    def put(self, session: int, tokens: int) -> None:
        """A session's request finished: its context (whole blocks) is cached, most recently used."""
        whole = tokens // self.block_tokens * self.block_tokens
        self.host.pop(session, None)
        if whole > 0:
            self.gpu[session] = whole
            self.gpu.move_to_end(session)

    def _evict(self, held: int) -> None:
        """Least recently used entries leave the GPU until the rest fit beside `held` tokens; to the host tier
        when there is one, its own least recently used dropped beyond its capacity."""
        room = self.capacity_tokens - held
        total = sum(self.gpu.values())
        while self.gpu and total > room:
            key, tokens = self.gpu.popitem(last=False)
            total -= tokens
            if self.host_tokens > 0:
                self.host[key] = tokens
        if self.host_tokens > 0:
            total = sum(self.host.values())
            while self.host and total > self.host_tokens:
                total -= self.host.popitem(last=False)[1]


@dataclass
class Sessions:
    """The sends of multi-turn sessions (module docstring): request r's next turn `following[r]` (-1: none), sent
    `think_s` after r finishes; first turns at their arrival or by `concurrency` clients. Slots of the loop's
    per-request lists are filled in send order (`place`)."""

    arrival_s: FloatArray
    following: IntArray
    think_s: FloatArray
    concurrency: int | None
    queue: deque[int]  # first turns not yet sent (closed loop)
    prompt: list[int]
    output: list[int]
    cached: list[int]
    session: list[int]
    workload: list[int]
    kv_limit: int  # a turn whose prompt and output exceed this is rejected (it never fits the KV cache)
    heap: list[tuple[float, int]] = field(default_factory=list)
    request_of: list[int] = field(default_factory=list)  # slot -> request

    @classmethod
    def start(cls, requests: Requests, workload: IntArray, kv_limit: int) -> Sessions:
        """The sends of `requests` (with sessions): first turns queued, the first ones sent (module docstring). A
        session's requests share its first request's workload class (one kind of text)."""
        assert requests.session is not None and requests.think_s is not None
        session = requests.session
        n = requests.n
        same = np.concatenate([(session[1:] == session[:-1]) & (session[1:] >= 0), [False]])
        following = np.where(same, np.arange(1, n + 1), -1).astype(np.int64)
        first = np.concatenate([[True], ~same[:-1]]) if n else np.zeros(0, dtype=bool)
        head = np.maximum.accumulate(np.where(first, np.arange(n), 0)) if n else np.zeros(0, dtype=np.int64)
        cached = requests.cached_tokens if requests.cached_tokens is not None else np.zeros(n, dtype=np.int64)
        out = cls(requests.arrival_s, following, requests.think_s, requests.concurrency,
                  deque(np.flatnonzero(first).tolist()), requests.prompt_tokens.tolist(),
                  requests.output_tokens.tolist(), cached.tolist(), session.tolist(), workload[head].tolist(), kv_limit)
        for _ in range(len(out.queue) if requests.concurrency is None else requests.concurrency):
            out._send_first(0.0)
        return out

    def _send_first(self, t: float) -> None:
        if self.queue:
            r = self.queue.popleft()
            heapq.heappush(self.heap, (max(float(self.arrival_s[r]), t), r))

    def next_s(self) -> float:
        """When the next pending send is due (inf: none)."""
        return self.heap[0][0] if self.heap else INF

    def finished(self, requests: list[int], t: float) -> None:
        """Requests finished (or were rejected) at t: their sessions' next turns are sent after their think time;
        a session that ended frees its client for the next session."""
        for r in requests:
            nxt = int(self.following[r])
            if nxt >= 0:
                heapq.heappush(self.heap, (t + float(self.think_s[nxt]), nxt))
            elif self.concurrency is not None:
                self._send_first(t)

    def due(self, t: float) -> list[tuple[float, int]]:
        """The sends due by t, in time order (each then takes the next slot)."""
        out: list[tuple[float, int]] = []
        while self.heap and self.heap[0][0] <= t:
            out.append(heapq.heappop(self.heap))
        self.request_of.extend(r for _, r in out)
        return out

    def end(self, t: float) -> None:
        """A turn was rejected at t (it never fits the KV cache): its session ends there, its later turns are
        never sent (they count as rejected) and a closed loop's client takes the next session."""
        if self.concurrency is not None:
            self._send_first(t)

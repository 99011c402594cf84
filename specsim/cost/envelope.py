"""A pass over more tokens never costs less than one over fewer: the monotone envelope of a kernel's time over the
new tokens per sequence, q, at the same batch and context (issue 22).

A kernel's launch configuration changes with q in steps (FlashAttention's 64-row query tiles of the q x group rows
a KV head serves, XQA's 16-row MMA tiles, FlashAttention-2 splitting the KV only at q = 1, XQA taking q <= 16), and
a step up in CTAs can stream the same KV cache faster: priced kernel by kernel, verifying 9 tokens can cost less than
verifying 8. An engine could always run the smaller pass in the larger one's configuration (padding its queries),
so a pass is priced at the envelope min over q' >= q of the kernel's time (q' <= Q_ENVELOPE). Between two steps the
configuration is fixed and the time does not fall with q, so only q itself and the first q of each step are
candidates."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from specsim.cost.attention import ATTENTION_Q_TILE, XQA_MAX_Q
from specsim.cost.memo import unique_rows
from specsim.cost.roofline import Array

#: New tokens per sequence up to which the envelope holds: verification of chains and trees (up to 64 nodes).
Q_ENVELOPE = 64.0
XQA_TILE_ROWS = 16.0  # XQA's mma.sync tiles (attention._xqa_time_s)


def step_points(group: float, kernel: str) -> Array:
    """The q in [2, Q_ENVELOPE] at which a kernel of this family may change its launch configuration for a KV head
    serving `group` query heads: the first q of each query tile (64 rows; XQA's 16), FlashAttention-2's and
    XQA's q = 1 -> 2 switch and XQA's last verification length + 1."""
    q = np.arange(2.0, Q_ENVELOPE + 1.0)
    tile = XQA_TILE_ROWS if kernel == "xqa" else ATTENTION_Q_TILE
    steps = np.ceil(q * group / tile) > np.ceil((q - 1.0) * group / tile)
    steps |= (q == 2.0) | (q == XQA_MAX_Q + 1.0)
    return q[steps]


def monotone_in_q(price: Callable[[Array, Array, Array], Array], batch: ArrayLike, q_per_seq: ArrayLike,
                  context_len: ArrayLike, group: float, kernel: str, time_s: Array) -> Array:
    """`time_s` (= price(batch, q, context) of every element) lowered to the envelope min over the step points
    q' > q of price(batch, q', context), for q < Q_ENVELOPE: one call of `price` over each distinct (batch, context)
    and every step point (a sweep over q shares them)."""
    b, q, ctx = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (batch, q_per_seq, context_len)))
    t = np.array(np.broadcast_to(time_s, b.shape), dtype=float).reshape(-1)
    points = step_points(group, kernel)
    qs = q.reshape(-1, 1)
    pair = (points[None, :] > qs) & (qs < Q_ENVELOPE)
    if not pair.any():
        return t.reshape(b.shape)
    rows = pair.any(axis=1)
    pairs, inverse = unique_rows(b.reshape(-1)[rows], ctx.reshape(-1)[rows])
    grid = np.asarray(price(pairs[:, :1], points[None, :], pairs[:, 1:]), dtype=float)  # distinct (b, ctx) x points
    alt = np.where(pair[rows], grid[inverse], np.inf).min(axis=1)
    t[rows] = np.minimum(t[rows], alt)
    return t.reshape(b.shape)

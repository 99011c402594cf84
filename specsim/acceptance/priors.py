"""Sourced acceptance priors: the catalogue (``data/priors.yaml``) and the lookup that picks one.

Most users have not measured acceptance when they first ask specsim; a prior then decides the
answer, so it has to be sourced, per position, honest about trees, and carry its uncertainty.

The catalogue holds published measurements (method, target, draft checkpoint, task, temperature,
the shape they were measured with, and per-position rates, a mean acceptance length tau, or an
alpha), each naming its source. This module turns every entry into **conditional per-depth rates**
``c_1..c_32`` (``c_i`` = P(draft i accepted | drafts 1..i-1 accepted), the chain rate of depth i):

* per-position data (vLLM / SGLang / dashboards) are used as measured; positions past the measured
  depth follow the method's stated decay model (``DecayModel``), never a flat rate;
* a tau measured with a *chain* (or a parallel block) of depth k is fitted by scaling the method's
  decay shape so that ``1 + sum_i prod_{j<=i} c_j`` equals tau;
* a tau measured with a *tree* is fitted the same way through the tree model: siblings by the
  hazard model ``trees.sibling_probs_hazard`` and the tree the source ran (EAGLE's static 25-node
  tree, Medusa's 63-node tree, or an EAGLE-2/SGLang dynamic tree of (topk, depth, nodes)), so a
  tree-measured tau is never reused as a chain tau, and no tree factor is ever applied to it;
* an alpha (Leviathan et al.'s i.i.d. model) is a flat rate, as its source defines it.

Feeding an entry's own source shape back reproduces its published figure (tests check this
against the sources' numbers).

Lookup API (agreed with the published-results validation, ``specsim validate --published``)::

    lookup(method, target=ModelSpec | name | None, draft=ModelSpec | name | None, task=None,
           temperature=None, shape=None, exclude=()) -> PriorMatch

* ``method``: a specsim draft method or a catalogue method (eagle, eagle2, eagle3, hass, medusa,
  hydra, mtp, draft_model, ngram, suffix, lookahead, p_eagle, dflash, dspark, ...; aliases such as
  ``eagle-3``, ``pld``, ``sps``, ``sam``, ``recycling`` are accepted);
* ``target``: the served model (family and size are read from the name and ``n_params()``);
* ``draft``: a draft checkpoint name (EAGLE heads: matches the catalogue's checkpoint), or for
  ``draft_model`` the draft model; without a catalogue entry for that pair the **pair model**
  predicts alpha from the size ratio (Leviathan et al. 2022, Table 3) and says so;
* ``task``: chat | code | math | summarisation | translation | rag | reasoning | qa | mixed |
  tool_call | writing | lm (``task_of_dataset`` maps benchmark names); None = chat, stated;
* ``temperature``: sampling temperature; None = not given (greedy central, band down to T=1);
* ``shape``: the configuration asked about (``int`` k = a chain, a ``Shape``, a ``Tree``, or a
  mapping ``{depth|k, topk, num_draft_tokens}``); it sets the reference for choosing and for the
  band, and ``tau_for`` evaluates any other;
* ``exclude``: entry ids or substrings of sources to leave out (held-out validation, e.g. the
  arXiv id of the paper whose rows are being predicted).

``PriorMatch`` fields: ``.conditional_rates`` (central, 32 positions), ``.low`` / ``.high``
(``RateModel`` with the same interface), ``.tau_for(k | Tree | Shape)``, ``.tau_band(shape)``,
``.entry_id`` (the representative entry), ``.entry_ids`` (all equally close), ``.distance`` (and
``.components``), ``.measured_depth`` (positions measured directly; deeper ones follow the
stated model), ``.note`` (what the number is, how far it was carried, and "measure yours"),
``.profile(which)`` (an ``AcceptanceProfile`` for the planner).
"""

from __future__ import annotations

import math
import os
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from specsim.acceptance.chain import AcceptanceProfile
from specsim.acceptance.trees import (
    Tree,
    eagle2_expected_tokens,
    sibling_probs_hazard,
    static_tree,
)
from specsim.errors import SpecsimError

FloatArray = NDArray[np.float64]

#: Positions every prior describes (past the measured depth by the stated decay model).
MAX_DEPTH = 32
#: No draft position is accepted with certainty; per-position conditional rates are capped here.
RATE_CAP = 0.98
#: One-sided z of the band: low/high are the 10th/90th percentiles of a log-normal (tau - 1).
BAND_Z = 1.2816

MEASURE_YOURS = ("measure yours: scrape the engine's /metrics before and after a representative window of "
                 "your traffic and give both (a scenario draft's acceptance: {before: B, after: A})")

# ---------------------------------------------------------------------------------------------
# methods
# ---------------------------------------------------------------------------------------------

ALIASES = {
    "eagle1": "eagle", "eagle-1": "eagle", "eagle-2": "eagle2", "eagle-3": "eagle3", "eagle_3": "eagle3",
    "draft": "draft_model", "sps": "draft_model", "standalone": "draft_model", "draft-model": "draft_model",
    "sequoia": "draft_model", "pld": "ngram", "prompt_lookup": "ngram", "n-gram": "ngram", "n_gram": "ngram",
    "medusa1": "medusa", "medusa-1": "medusa", "medusa2": "medusa", "medusa-2": "medusa", "sam": "sam_eagle2",
    "recycling": "token_recycling", "p-eagle": "p_eagle", "peagle": "p_eagle", "deepseek_mtp": "mtp",
    "nextn": "mtp", "suffix_decoding": "suffix", "magicdec": "self_spec_sparse_kv",
}

#: Decay-model group of each method: whose per-position measurements give its decay shape.
DECAY_GROUP = {
    "eagle": "eagle", "eagle2": "eagle", "hass": "eagle", "eagle3_ablation": "eagle", "sam_eagle2": "eagle",
    "hydra": "eagle", "eagle3": "eagle3", "mtp": "mtp", "medusa": "medusa", "p_eagle": "eagle3",
    "dflash": "dflash", "dspark": "dspark", "draft_model": "iid", "self_spec_sparse_kv": "iid",
    "lookahead": "iid", "ngram": "lookup", "suffix": "lookup", "rest": "lookup", "token_recycling": "lookup",
}
#: How task and temperature move acceptance: learned heads, standalone draft models, or lookup of
#: text that already exists (the research notes' three regimes).
EFFECT_CLASS = {m: ("draft_model" if g == "iid" and m != "lookahead" else "lookup" if g in ("lookup",)
                    or m == "lookahead" else "head") for m, g in DECAY_GROUP.items()}

#: Methods whose measurements stand in for another's, with the distance added. EAGLE-2 runs
#: EAGLE-1's draft head (Li et al. 2024, EAGLE-2 Sec. 4: "the same draft model as EAGLE"), so only
#: the tree differs, and the tree is modelled explicitly; the others are stated approximations.
RELATED: dict[str, dict[str, float]] = {
    "eagle": {"eagle2": 0.15, "hass": 0.8, "sam_eagle2": 1.0},
    "eagle2": {"eagle": 0.15, "hass": 0.8, "sam_eagle2": 1.0},
    "hass": {"eagle2": 0.8, "eagle": 0.8},
    "eagle3": {"eagle2": 1.5, "hass": 1.5},
    "medusa": {"hydra": 1.5},
    "hydra": {"medusa": 1.5},
    "p_eagle": {"dflash": 1.2, "dspark": 1.2, "eagle3": 1.5},
    "dflash": {"dspark": 1.0, "p_eagle": 1.2},
    "dspark": {"dflash": 1.0, "p_eagle": 1.2},
    "mtp": {"eagle3": 1.5},
    "suffix": {"ngram": 1.5},
    "ngram": {"suffix": 1.5},
}


def canonical_method(method: str) -> str:
    """A method name in the catalogue's spelling (``eagle-3`` -> ``eagle3``, ``pld`` -> ``ngram``)."""
    m = str(method).strip().lower().replace(" ", "_")
    return ALIASES.get(m, ALIASES.get(m.replace("_", "-"), m))


# ---------------------------------------------------------------------------------------------
# tasks, families
# ---------------------------------------------------------------------------------------------

TASKS = ("chat", "code", "math", "summarisation", "translation", "rag", "reasoning", "qa", "mixed", "tool_call",
         "writing", "lm")
_DATASET_TASKS = (
    (r"mt-?bench|alpaca|sharegpt|chat|magpie|sonnet|arena", "chat"),
    (r"human-?eval|mbpp|code|livecodebench|swe|blazedit|edit", "code"),
    (r"gsm|math|aime", "math"),
    (r"cnn|dm|xsum|summar", "summarisation"),
    (r"translat|wmt|ende", "translation"),
    (r"natural.?questions|\bqa\b|gpqa|financeqa|nq\b", "qa"),
    (r"rag", "rag"),
    (r"spec-?bench|overall|mixed|speed-?bench|mean", "mixed"),
    (r"lm1b|pg-?19|c4|openwebtext|wiki", "lm"),
)


def task_of_dataset(dataset: str | None) -> str | None:
    """The catalogue task of a benchmark name (``mt-bench`` -> chat, ``humaneval`` -> code, ...)."""
    if not dataset:
        return None
    d = str(dataset).lower()
    if d in TASKS:
        return d
    for pattern, task in _DATASET_TASKS:
        if re.search(pattern, d):
            return task
    return None


_FAMILIES = (
    (r"vicuna|^llama-?1|llama-68m|llama-7b$", "llama"),
    (r"llama-?2|codellama", "llama2"),
    (r"llama-?3|deepseek-r1-distill-llama", "llama3"),
    (r"llama-?4", "llama4"),
    (r"qwen3\.5", "qwen3.5"), (r"qwen3\.6", "qwen3.6"), (r"qwen3\.8", "qwen3.8"),
    (r"qwen3-?next", "qwen3-next"), (r"qwen3-?vl", "qwen3-vl"), (r"qwen3", "qwen3"), (r"qwen2\.5", "qwen2.5"),
    (r"qwen", "qwen"), (r"gpt-?oss", "gpt-oss"), (r"deepseek-?v4", "deepseek-v4"),
    (r"deepseek|dsv3|r1", "deepseek-v3"), (r"mixtral", "mixtral"), (r"mistral", "mistral"),
    (r"kimi-?k3", "kimi-k3"), (r"kimi", "kimi-k2"), (r"glm", "glm"), (r"minimax", "minimax"), (r"t5", "t5"),
    (r"lamda", "lamda"), (r"chinchilla", "chinchilla"), (r"ling", "ling"),
)
#: Families that share training lineage (a Llama-3 prior is closer to a Llama-4 target than a Qwen one).
_LINEAGE = {"llama": "llama", "llama2": "llama", "llama3": "llama", "llama4": "llama", "qwen": "qwen",
            "qwen2.5": "qwen", "qwen3": "qwen", "qwen3.5": "qwen", "qwen3.6": "qwen", "qwen3.8": "qwen",
            "qwen3-next": "qwen", "qwen3-vl": "qwen", "deepseek-v3": "deepseek", "deepseek-v4": "deepseek",
            "kimi-k2": "kimi", "kimi-k3": "kimi", "mistral": "mistral", "mixtral": "mistral"}


def family_of(name: str) -> str:
    """The catalogue family of a model name (``llama-3.1-70b`` -> llama3, ``vicuna-7b`` -> llama)."""
    n = str(name).lower()
    for pattern, fam in _FAMILIES:
        if re.search(pattern, n):
            return fam
    return n.split("-")[0]


_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([bm])\b", re.I)


def params_of_name(name: str) -> float | None:
    """Parameters in billions read from a name (``llama-3.2-1b`` -> 1.0, ``vicuna-68m`` -> 0.068)."""
    hits = _SIZE.findall(str(name).lower().replace("x", " "))
    if not hits:
        return None
    value, unit = hits[-1] if not re.search(r"-a\d", str(name).lower()) else hits[0]
    return float(value) / (1000.0 if unit.lower() == "m" else 1.0)


# ---------------------------------------------------------------------------------------------
# shapes
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """How a step drafts and verifies: a chain of ``depth``, a parallel block of ``depth`` drafted in
    one pass (acceptance as a chain), or a tree of ``depth`` levels (a published static tree, or a
    dynamic EAGLE-2 / SGLang tree that expands ``topk`` per level and verifies ``nodes`` drafts,
    root excluded). ``assumed`` says what the source did not state and what was used instead."""

    kind: str  # chain | parallel | tree
    depth: int
    topk: int = 1
    nodes: int | None = None
    static: str = ""  # eagle1 | medusa for the published static trees
    assumed: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ("chain", "parallel", "tree"):
            raise SpecsimError(f"shape kind must be chain, parallel or tree, got {self.kind!r}")
        if self.depth < 0:
            raise SpecsimError(f"shape depth must be >= 0, got {self.depth}")

    @property
    def is_tree(self) -> bool:
        return self.kind == "tree"

    @property
    def num_nodes(self) -> int:
        """Draft tokens verified per sequence (root excluded)."""
        if self.static:
            return static_tree(self.static).num_nodes
        if self.is_tree:
            return int(self.nodes if self.nodes is not None else self.topk * self.depth)
        return self.depth

    def label(self) -> str:
        if self.static:
            return f"{self.static} static tree ({self.num_nodes} nodes, depth {self.depth})"
        if self.is_tree:
            return f"tree topk {self.topk}, depth {self.depth}, {self.num_nodes} nodes"
        return f"{self.kind} of {self.depth}"

    def tree(self, rates: Sequence[float]) -> Tree:
        """The tree this shape verifies, for conditional per-depth ``rates`` (a chain for chains)."""
        from specsim.acceptance.trees import chain, eagle2_tree

        if not self.is_tree:
            return chain(self.depth)
        if self.static:
            return static_tree(self.static)
        probs = sibling_probs_hazard(np.asarray(rates[: self.depth], dtype=float), self.topk)
        return eagle2_tree(probs, self.topk, self.depth, self.num_nodes)


def chain_shape(k: int) -> Shape:
    return Shape("chain", int(k))


def as_shape(shape: Any) -> Shape:
    """A ``Shape`` from an int (chain k), a Shape, a Tree (fixed tree, evaluated as given) or a mapping."""
    if isinstance(shape, Shape):
        return shape
    if isinstance(shape, bool):
        raise SpecsimError(f"shape must be k, a Shape, a Tree or a mapping, got {shape!r}")
    if isinstance(shape, int | np.integer):
        return chain_shape(int(shape))
    if isinstance(shape, Mapping):
        depth = shape.get("depth", shape.get("k"))
        if depth is None:
            raise SpecsimError(f"shape mapping needs 'depth' (or 'k'), got {dict(shape)!r}")
        topk = int(shape.get("topk") or 1)
        nodes = shape.get("num_draft_tokens", shape.get("nodes"))
        kind = str(shape.get("kind") or ("tree" if topk > 1 else "chain"))
        return Shape(kind, int(depth), topk, None if nodes is None else int(nodes))
    raise SpecsimError(f"shape must be k, a Shape, a Tree or a mapping, got {shape!r}")


def tau_of(rates: Sequence[float] | FloatArray, shape: Shape | Tree | int) -> float:
    """Expected tokens per step (bonus included) of conditional per-depth ``rates`` in ``shape``."""
    r = np.asarray(rates, dtype=float)
    if isinstance(shape, Tree):
        if shape.num_nodes == 0:
            return 1.0
        ranks = int(shape.ranks.max()) + 1
        return float(shape.expected_tokens(sibling_probs_hazard(r[: shape.depth], ranks)))
    s = as_shape(shape)
    if s.depth > r.size:
        raise SpecsimError(f"depth {s.depth} exceeds the {r.size} positions this prior describes")
    if not s.is_tree:
        return float(1.0 + np.cumprod(r[: s.depth]).sum())  # chain formula (seed chapter)
    if s.static:
        return tau_of(r, static_tree(s.static))
    probs = sibling_probs_hazard(r[: s.depth], s.topk)
    return float(eagle2_expected_tokens(probs, s.topk, s.depth, s.num_nodes))


def _tau_grid(rates: FloatArray, shape: Shape) -> FloatArray:
    """tau for a stack of rate vectors (leading axis), vectorised (the fitting grid)."""
    if not shape.is_tree:
        return 1.0 + np.cumprod(rates[:, : shape.depth], axis=-1).sum(axis=-1)
    if shape.static:
        tree = static_tree(shape.static)
        ranks = int(tree.ranks.max()) + 1
        return np.asarray(tree.expected_tokens(sibling_probs_hazard(rates[:, : tree.depth], ranks)))
    probs = sibling_probs_hazard(rates[:, : shape.depth], shape.topk)
    return np.asarray(eagle2_expected_tokens(probs, shape.topk, shape.depth, shape.num_nodes))


# ---------------------------------------------------------------------------------------------
# the catalogue entries
# ---------------------------------------------------------------------------------------------

#: Shapes of the published implementations when a source does not restate them.
_DEFAULT_DEPTH = {
    "draft_model": (5, "HF assisted generation num_assistant_tokens = 5 (transformers GenerationConfig), "
                       "which Spec-Bench's and EAGLE-2's SpS baselines run"),
    "ngram": (10, "prompt lookup decoding defaults (apoorvumang/prompt-lookup-decoding: max n-gram 3, "
                  "10 continuation tokens), as run by Spec-Bench"),
    "lookahead": (4, "lookahead decoding defaults (hao-ai-lab/LookaheadDecoding, Spec-Bench: level N = 5, "
                     "k = N - 1 = 4 positions per guess, window 7, guesses 7)"),
    "mtp": (3, "k not stated: 3 drafted tokens assumed (the engines' usual MTP setting, SGLang cookbook "
               "--speculative-num-steps 3)"),
    "eagle3": (3, "k not stated: 3 assumed (vLLM/SGLang chain default in the recipes)"),
    "eagle": (5, "k not stated: EAGLE's 5 draft passes assumed"),
    "dflash": (7, "block size not stated: 7 drafts per block assumed (vLLM DFlash recipes)"),
    "dspark": (7, "block size not stated: 7 drafts per block assumed"),
    "p_eagle": (7, "K not stated: 7 assumed (vLLM P-EAGLE post)"),
    "suffix": (5, "k not stated: 5 assumed"),
}
#: EAGLE repo evaluation defaults for the EAGLE-3 paper's dynamic tree: EaModel.from_pretrained
#: total_token = 60 (59 drafts + root), depth = 7 (= 8 draft layers; "depth = max draft length - 1"
#: in eagle/evaluation/gen_ea_answer_llama3chat.py), top_k = 10 (SafeAILab/EAGLE ea_model.py). Depth 8
#: is also what the paper's taus require (7.54 on HumanEval needs more than 6.54 draft positions).
EAGLE3_PAPER_TREE = Shape("tree", 8, 10, 59, assumed="EAGLE repo defaults for the EAGLE-3 paper's dynamic tree: "
                           "60 total tokens, 8 draft layers, top-10 (SafeAILab/EAGLE ea_model.py)")
EAGLE2_PAPER_TREE = Shape("tree", 6, 10, 59, assumed="EAGLE-2 App. A: 60 total tokens, depth 6, 10 expanded")


def _resolve_shape(e: Mapping[str, Any]) -> Shape | None:
    """The shape an entry was measured with, filling what the source left out (stated in ``assumed``)."""
    method = canonical_method(e["method"])
    s = e.get("shape") or {}
    kind = s.get("kind")
    name = str(s.get("name") or "")
    depth = s.get("depth")
    if kind in ("heads", "tree-siblings"):
        return None
    if name == "eagle1-static-tree":
        return Shape("tree", 5, 4, 25, static="eagle1")
    if name.startswith("medusa-default") or name == "hydra-default" or (method == "hydra" and kind in (
            "tree", "method-default")):
        assumed = "" if method == "medusa" else ("Hydra's default tree taken as Medusa's 63-node tree "
                                                 "(Hydra builds on Medusa's code and trees)")
        return Shape("tree", 4, 10, 63, static="medusa", assumed=assumed)
    if name == "eagle2-dynamic":
        ndt = s.get("num_draft_tokens")
        if ndt is None:
            return EAGLE2_PAPER_TREE
        return Shape("tree", int(depth or 6), int(s.get("topk") or 10), int(ndt) - 1)
    if name == "eagle3-dynamic-tree" or (kind == "method-default" and method == "eagle3"):
        return EAGLE3_PAPER_TREE
    if kind == "method-default":
        if method in ("sam_eagle2", "token_recycling", "rest"):
            return Shape("tree", 6, 10, 59, assumed=f"Spec-Bench default {method} tree not stated; a 60-token "
                         "depth-6 tree like EAGLE-2's assumed")
        if method in _DEFAULT_DEPTH:
            k, why = _DEFAULT_DEPTH[method]
            return Shape("chain", k, assumed=why)
    if kind == "lookahead":
        k, why = _DEFAULT_DEPTH["lookahead"]
        return Shape("chain", k, assumed=why)
    if kind == "tree":
        topk = s.get("topk")
        ndt = s.get("num_draft_tokens")
        if depth is not None and topk is not None and ndt is not None:
            # SGLang: num_draft_tokens counts the root (trees.eagle2_tree docstring)
            return Shape("tree", int(depth), int(topk), int(ndt) - 1)
        if depth is not None and topk is not None:
            return Shape("tree", int(depth), int(topk), int(topk) * int(depth),
                         assumed="verified tokens not stated: every expanded candidate assumed verified")
        if depth is not None:
            nodes = 31 if int(depth) <= 5 else 63
            return Shape("tree", int(depth), 8, nodes, assumed=f"topk / draft tokens not stated: SGLang's EAGLE "
                         f"example (--speculative-eagle-topk 8, --speculative-num-draft-tokens {nodes + 1}) assumed")
        return Shape("tree", 3, int(topk or 4), 7, assumed="depth / draft tokens not stated: SGLang "
                     "--speculative-num-steps 3, --speculative-num-draft-tokens 8 assumed")
    if kind in ("chain", "parallel_block", "unknown"):
        shape_kind = "parallel" if kind == "parallel_block" else "chain"
        if depth is not None:
            return Shape(shape_kind, int(depth))
        if s.get("window_tokens"):
            k = max(1, int(s["window_tokens"]) - 1)
            return Shape(shape_kind, k, assumed=f"'{int(s['window_tokens'])}-token MTP window' read as SGLang "
                         f"num_draft_tokens (root included): {k} draft steps")
        k, why = _DEFAULT_DEPTH.get(method, (5, "k not stated: 5 assumed"))
        return Shape(shape_kind, k, assumed=why)
    return None


@dataclass(frozen=True)
class PriorEntry:
    """One catalogue entry with its acceptance turned into conditional per-depth rates."""

    id: str
    method: str
    family: str
    target: str
    target_params_b: float | None
    draft: str
    draft_params_b: float | None
    task: str
    dataset: str
    temperature: float | None
    shape: Shape | None
    published: Mapping[str, Any]  # the figures the source gives: tau, alpha, conditional, cumulative, ...
    source: str
    implementation: str
    rates: tuple[float, ...]  # conditional per-depth rates, MAX_DEPTH positions
    measured_depth: int  # positions taken from per-position data (0: fitted from a mean)
    fit: str  # how the rates were obtained
    quality: float  # 0 = a point value stated by the source; larger = weaker evidence
    synthetic: bool = False  # random-token benchmarks: not a workload prior

    @property
    def tau(self) -> float | None:
        """The published mean acceptance length (bonus included) in the entry's own shape, if any."""
        t = self.published.get("tau")
        return None if t is None else float(t)

    def tau_for(self, shape: Shape | Tree | int) -> float:
        return tau_of(self.rates, shape)

    def reference_tau(self) -> float:
        """The entry's tau in its own shape (or a chain of 5 when the source gave per-token rates)."""
        return self.tau_for(self.shape if self.shape is not None else chain_shape(5))


# ---------------------------------------------------------------------------------------------
# decay models (per-position shapes by method group)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DecayModel:
    """Conditional rate at position i relative to position 1, for a group of methods.

    ``relative[i-1]`` is the median over the catalogue's per-position entries of ``c_i / c_1``
    (positions with at least 3 entries); past them each position multiplies by ``tail_ratio`` (the
    median ratio of the last two measured positions). Rates are capped at ``RATE_CAP``.
    """

    group: str
    relative: tuple[float, ...]
    tail_ratio: float
    evidence: tuple[str, ...]  # entry ids the shape was read from
    source: str

    def relative_curve(self, depth: int = MAX_DEPTH) -> FloatArray:
        """c_i / c_1 for i = 1..depth: the measured medians, then ``tail_ratio`` per position."""
        rel = np.empty(depth)
        n = min(depth, len(self.relative))
        rel[:n] = self.relative[:n]
        if depth > n:
            rel[n:] = rel[n - 1] * self.tail_ratio ** np.arange(1, depth - n + 1)
        return rel

    def rates_from_first(self, first: float | FloatArray, depth: int = MAX_DEPTH) -> FloatArray:
        """Rates for a first-position rate (scalar, or an array: one row per value)."""
        f = np.asarray(first, dtype=float)
        return np.clip(f[..., None] * self.relative_curve(depth), 0.0, RATE_CAP)

    def extend(self, measured: Sequence[float], depth: int = MAX_DEPTH) -> FloatArray:
        """Measured rates, continued past their depth along this model: ``c_i = c_n rel_i / rel_n``."""
        m = np.asarray(measured, dtype=float)
        n = min(depth, m.size)
        rel = self.relative_curve(depth)
        out = np.empty(depth)
        out[:n] = m[:n]
        if depth > n:
            out[n:] = m[n - 1] * rel[n:] / max(rel[n - 1], 1e-9)
        return np.clip(out, 0.0, RATE_CAP)

    def describe(self) -> str:
        shown = ", ".join(f"{r:.2f}" for r in self.relative[:6])
        return (f"{self.group} decay model: c_i / c_1 = {shown}{', ...' if len(self.relative) > 6 else ''}, then "
                f"x{self.tail_ratio:.3f} per position ({self.source})")


def _conditional_of(e: Mapping[str, Any]) -> list[float] | None:
    if e.get("conditional"):
        return [float(x) for x in e["conditional"]]
    if e.get("cumulative"):
        u = np.asarray(e["cumulative"], dtype=float)
        prev = np.concatenate([[1.0], u[:-1]])
        return [float(x) for x in np.where(prev > 0, u / np.where(prev > 0, prev, 1.0), 0.0)]
    return None


def _is_synthetic(e: Mapping[str, Any]) -> bool:
    text = f"{e.get('notes', '')} {e.get('dataset', '')}".lower()
    return "synthetic" in text or "random-token" in text or "random tokens" in text


def _derive_decay_models(raw: list[Mapping[str, Any]]) -> dict[str, DecayModel]:
    per_group: dict[str, list[tuple[str, list[float]]]] = defaultdict(list)
    for e in raw:
        method = canonical_method(e["method"])
        cond = _conditional_of(e)
        if cond and len(cond) >= 2 and not _is_synthetic(e) and cond[0] > 0.3 and "derived" not in e:
            per_group[DECAY_GROUP.get(method, "iid")].append((e["id"], cond))
    models: dict[str, DecayModel] = {}
    for group, items in per_group.items():
        rel_by_pos: dict[int, list[float]] = defaultdict(list)
        tails = []
        for _, cond in items:
            for i, c in enumerate(cond):
                rel_by_pos[i].append(c / cond[0])
            tails.append(cond[-1] / cond[-2] if cond[-2] > 0 else 1.0)
        need = min(3, len(items))  # positions backed by at least 3 entries (2 in a group of 2)
        relative = [float(np.median(rel_by_pos[i])) for i in sorted(rel_by_pos) if len(rel_by_pos[i]) >= need]
        if len(items) < 2 or len(relative) < 2:
            continue
        # deeper positions are not easier for a learned drafter (cap 1); lookup drafts may rise
        tail = float(np.clip(np.median(tails), 0.85, 1.05 if group == "lookup" else 1.0))
        models[group] = DecayModel(group, tuple(relative), tail, tuple(i for i, _ in items),
                                   f"median of {len(items)} per-position catalogue entries")
    # Medusa: heads predict independently, so conditional acceptance of head i is modelled as its
    # marginal top-1 accuracy relative to head 1 (FasterDecoding/Medusa assets/medusa_acc.csv).
    heads = [(e["id"], [float(x) for x in e["marginal_head_accuracy"]]) for e in raw if e.get("marginal_head_accuracy")]
    if heads:
        rel = np.median([np.asarray(a) / a[0] for _, a in heads], axis=0)
        models["medusa"] = DecayModel("medusa", tuple(float(x) for x in rel), float(rel[-1] / rel[-2]),
                                      tuple(i for i, _ in heads), "Medusa heads' marginal top-1 accuracy by head "
                                      "(independent heads), medusa_acc.csv")
    # i.i.d. drafts: Leviathan et al.'s model (one alpha for every position), as their source states it.
    models["iid"] = DecayModel("iid", (1.0,), 1.0, (), "Leviathan et al. 2022's i.i.d. alpha model")
    for group in ("dflash", "dspark"):
        models.setdefault(group, models.get("eagle3", models["iid"]))
    models.setdefault("mtp", models.get("eagle3", models["iid"]))
    models.setdefault("lookup", models["iid"])
    return models


# ---------------------------------------------------------------------------------------------
# fitting entries
# ---------------------------------------------------------------------------------------------

_GRID = np.linspace(0.002, RATE_CAP, 2000)


@cache
def _curve(model: DecayModel, shape: Shape) -> FloatArray:
    """tau on the grid of first-position rates, for one decay model and one shape (cached)."""
    return _tau_grid(model.rates_from_first(_GRID), shape)


def _fit_first(model: DecayModel, shape: Shape, tau: float) -> float:
    """The first-position rate whose rates reproduce ``tau`` in ``shape``: linear interpolation on the
    cached monotone curve (2,000 points; the published figures are reproduced to about 1e-4)."""
    curve = _curve(model, shape)
    return float(np.interp(tau, curve, _GRID))


def _num(x: Any) -> float | None:
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _make_entry(e: Mapping[str, Any], models: Mapping[str, DecayModel]) -> PriorEntry | None:
    method = canonical_method(e["method"])
    model = models.get(DECAY_GROUP.get(method, "iid"), models["iid"])
    shape = _resolve_shape(e)
    tgt = e.get("target") or {}
    drf = e.get("draft") or {}
    published: dict[str, Any] = {}
    quality = 0.0
    notes = str(e.get("notes") or "")
    if "approximate" in notes.lower() or "~" in notes:
        quality += 0.1
    if "third-party" in f"{e.get('source', '')} {notes}".lower() or "assumed" in str(tgt.get("name", "")):
        quality += 0.1
    if shape is not None and shape.assumed:
        quality += 0.1
    tau = _num(e.get("tau"))
    if tau is None and e.get("tau_range"):
        lo, hi = (float(x) for x in e["tau_range"])
        tau, quality = 0.5 * (lo + hi), quality + 0.2
    mda = _num(e.get("mean_draft_acceptance"))
    if tau is None and mda is not None and shape is not None and not shape.is_tree:
        tau = 1.0 + shape.depth * mda  # vLLM: acceptance rate = accepted / draft tokens = (tau - 1) / k
        published["mean_draft_acceptance"] = mda
    if tau is not None and mda and shape is not None and shape.assumed and not shape.is_tree:
        k = max(1, round((tau - 1.0) / mda))  # both given: k = (tau - 1) / (accepted / drafted)
        shape = Shape(shape.kind, k, assumed=f"k not stated: {k} = (tau - 1) / acceptance rate {mda:g}")
    while (tau is not None and shape is not None and not shape.is_tree
           and tau > 1.0 + sum(RATE_CAP ** i for i in range(1, shape.depth + 1))):
        # the assumed depth cannot hold the published mean: take the smallest depth that can
        shape = Shape(shape.kind, shape.depth + 1, assumed=f"{shape.assumed.split('; depth raised')[0]}; depth "
                      f"raised to hold tau {tau:g}")
    cond = _conditional_of(e)
    cov = e.get("proposal_coverage") or {}
    step_tau = _num(cov.get("seq_normalized_tau"))
    if cond and step_tau is not None and tau is not None and tau > 1.0:
        # Rates measured per *proposed* draft, where a proposer drafts only on a match (vLLM V1's n-gram
        # proposer returns [] otherwise): per step the first position is reached on the share of steps
        # that draft, m = (tau_step - 1) / (tau_proposal - 1); deeper conditionals are unchanged.
        published["tau_per_proposal"] = tau
        cond = [cond[0] * (step_tau - 1.0) / (tau - 1.0), *cond[1:]]
        tau = step_tau
    if cond is None and e.get("conditional_range"):
        cond = [0.5 * (float(a) + float(b)) for a, b in e["conditional_range"]]
        quality += 0.05
    if cond is None and e.get("conditional_range_all"):
        lo, hi = (float(x) for x in e["conditional_range_all"])
        cond, quality = [0.5 * (lo + hi)] * 3, quality + 0.3  # figure reading: "almost unchanged" across positions
    if cond is None and e.get("conditional_endpoints"):
        cond, quality = [float(e["conditional_endpoints"][0])], quality + 0.3
    if cond is None and e.get("cumulative_at") and tau is None:
        first = _num(e["cumulative_at"].get("1", e["cumulative_at"].get(1)))
        if first is not None:
            cond, quality = [first], quality + 0.3
    if cond is None and tau is None and mda is not None and shape is not None and shape.depth == 1:
        cond = [mda]
    if e.get("acceptance_bound") or e.get("cumulative_bound"):
        quality += 0.3
    alpha = _num(e.get("alpha"))
    if alpha is None and e.get("sibling_acceptance"):
        alpha, quality = float(e["sibling_acceptance"][0]), quality + 0.2  # Sequoia: P(rank 0 accepted)
    if cond:
        rates = model.extend(cond)
        measured, fit = len(cond), f"{len(cond)} measured position(s); deeper: {model.describe()}"
        published["conditional"] = tuple(cond)
        if e.get("cumulative"):
            published["cumulative"] = tuple(float(x) for x in e["cumulative"])
        if tau is not None:
            published["tau"] = tau
    elif alpha is not None:
        rates = np.full(MAX_DEPTH, min(alpha, RATE_CAP))
        measured, fit = MAX_DEPTH, "i.i.d. alpha (Leviathan et al. 2022's model: one rate for every position)"
        published["alpha"] = alpha
    elif tau is not None and shape is not None:
        first = _fit_first(model, shape, tau)
        rates = model.rates_from_first(first)
        measured, fit = 0, f"fitted to tau {tau:g} measured as a {shape.label()}; {model.describe()}"
        published["tau"] = tau
    else:
        return None
    return PriorEntry(
        id=str(e["id"]), method=method, family=str(tgt.get("family") or family_of(str(tgt.get("name", "")))),
        target=str(tgt.get("name", "")), target_params_b=_num(tgt.get("params_b")),
        draft=str(drf.get("name") or ""), draft_params_b=_num(drf.get("params_b")), task=str(e.get("task") or "mixed"),
        dataset=str(e.get("dataset") or ""), temperature=_num(e.get("temperature")), shape=shape,
        published=published, source=str(e.get("source") or ""), implementation=str(e.get("implementation") or ""),
        rates=tuple(float(x) for x in rates), measured_depth=measured, fit=fit, quality=quality,
        synthetic=_is_synthetic(e),
    )


# ---------------------------------------------------------------------------------------------
# the catalogue, and the regularities read from it
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Catalogue:
    entries: tuple[PriorEntry, ...]
    decay: Mapping[str, DecayModel]
    temperature_ratio: Mapping[str, float]  # (tau-1) at T=1 over (tau-1) at T=0, by effect class
    temperature_pairs: Mapping[str, int]
    task_factor: Mapping[str, Mapping[str, float]]  # (tau-1) on a task over (tau-1) on chat, by effect class
    pair_model: PairModel
    raw_count: int

    def by_id(self, entry_id: str) -> PriorEntry:
        for e in self.entries:
            if e.id == entry_id:
                return e
        raise SpecsimError(f"no prior with id {entry_id!r}")


def _temperature_ratios(entries: Sequence[PriorEntry]) -> tuple[dict[str, float], dict[str, int]]:
    """Median (tau-1)_{T=1} / (tau-1)_{T=0} over entries that differ only in temperature."""
    groups: dict[tuple[Any, ...], dict[float, PriorEntry]] = defaultdict(dict)
    for e in entries:
        if e.temperature in (0.0, 1.0) and not e.synthetic:
            key = (e.method, e.target, e.draft, e.dataset, e.shape, e.source.split(",")[0], e.measured_depth > 0)
            groups[key][e.temperature] = e
    ratios: dict[str, list[float]] = defaultdict(list)
    for pair in groups.values():
        if 0.0 in pair and 1.0 in pair:
            t0, t1 = pair[0.0].reference_tau() - 1.0, pair[1.0].reference_tau() - 1.0
            if t0 > 0.05:
                ratios[EFFECT_CLASS.get(pair[0.0].method, "head")].append(t1 / t0)
    out = {cls: float(np.median(v)) for cls, v in ratios.items()}
    counts = {cls: len(v) for cls, v in ratios.items()}
    out.setdefault("lookup", 1.0)  # no paired data: prompt lookup proposes existing text (T-independent), stated
    return out, counts


def _task_factors(entries: Sequence[PriorEntry]) -> dict[str, dict[str, float]]:
    """Median (tau-1)_task / (tau-1)_chat over entries that differ only in task (chat = MT-bench)."""
    groups: dict[tuple[Any, ...], dict[str, list[PriorEntry]]] = defaultdict(lambda: defaultdict(list))
    for e in entries:
        if e.synthetic:
            continue
        key = (e.method, e.target, e.draft, e.temperature, e.shape, e.source.split(",")[0], e.measured_depth > 0)
        groups[key][e.task].append(e)
    per: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for by_task in groups.values():
        chats = [e for e in by_task.get("chat", []) if "mt" in e.dataset.lower()] or by_task.get("chat", [])
        if not chats:
            continue
        ref = float(np.median([c.reference_tau() - 1.0 for c in chats]))
        if ref <= 0.05:
            continue
        cls = EFFECT_CLASS.get(chats[0].method, "head")
        for task, es in by_task.items():
            if task != "chat":
                per[cls][task].append(float(np.median([x.reference_tau() - 1.0 for x in es])) / ref)
    out: dict[str, dict[str, float]] = {}
    for cls, tasks in per.items():
        out[cls] = {t: float(np.median(v)) for t, v in tasks.items() if len(v) >= 2}
        out[cls]["chat"] = 1.0
    return out


@dataclass(frozen=True)
class PairModel:
    """Draft-model acceptance from the target/draft size ratio: ``alpha = a - b log10(target / draft)``.

    Fitted on the catalogue's standalone-draft pairs (Leviathan et al. 2022 Table 3: LaMDA 137B with
    100M / 2B / 8B drafts, alpha 0.61 / 0.71 / 0.75; T5-XXL with T5-small/base/large; Vicuna-68M
    drafting for Vicuna-7B/13B) with one common slope and an intercept per series (same source,
    target, task and temperature); ``a`` is the median T=0 intercept and ``spread`` the intercepts'
    spread (the band). Same-tokenizer pairs only (specsim refuses others)."""

    slope: float
    intercept: float
    spread: float
    series: int
    points: int
    evidence: tuple[str, ...]

    def alpha(self, target_b: float, draft_b: float) -> float:
        ratio = max(target_b / max(draft_b, 1e-6), 1.0)
        return float(np.clip(self.intercept - self.slope * math.log10(ratio), 0.05, RATE_CAP))


def _pair_model(entries: Sequence[PriorEntry]) -> PairModel:
    pts: dict[tuple[Any, ...], list[tuple[float, float, str]]] = defaultdict(list)
    for e in entries:
        if (e.method == "draft_model" and e.target_params_b and e.draft_params_b and e.rates[0] > 0.3
                and not e.synthetic and e.target_params_b > e.draft_params_b):
            x = math.log10(e.target_params_b / e.draft_params_b)
            alpha = e.rates[0]
            pts[(e.source.split(",")[0], e.target, e.task, e.temperature)].append((x, alpha, e.id))
    series = [v for v in pts.values() if v]
    # common slope from the within-series variation (series with >= 2 sizes), intercepts per series
    num = den = 0.0
    for s in series:
        if len({x for x, _, _ in s}) < 2:
            continue
        mx, ma = float(np.mean([x for x, _, _ in s])), float(np.mean([a for _, a, _ in s]))
        num += sum((x - mx) * (a - ma) for x, a, _ in s)
        den += sum((x - mx) ** 2 for x, _, _ in s)
    slope = -num / den if den > 0 else 0.07
    by_source: dict[str, list[float]] = defaultdict(list)
    for key, s in pts.items():
        if key[3] in (0.0, None):  # greedy series set the intercept; temperature is applied separately
            by_source[key[0]].append(float(np.mean([a + slope * x for x, a, _ in s])))
    per_source = [float(np.median(v)) for v in by_source.values()]
    return PairModel(slope=float(slope), intercept=float(np.median(per_source)),
                     spread=float(np.std(per_source)) if len(per_source) > 1 else 0.05, series=len(series),
                     points=sum(len(s) for s in series), evidence=tuple(i for s in series for _, _, i in s))


def catalogue_path() -> str:
    return str(resources.files("specsim.acceptance") / "data" / "priors.yaml")


@cache
def load_catalogue() -> Catalogue:
    """The priors catalogue, every entry fitted (cached: one load per process, and on disk by the file's
    SHA-256 and specsim's version so that a CLI call does not parse and fit 1,000+ entries again)."""
    path = catalogue_path()
    key = _cache_key(path)
    cached = _read_cache(key)
    if cached is not None:
        return cached
    cat = _build_catalogue(path)
    _write_cache(key, cat)
    return cat


def _cache_key(path: str) -> str:
    import hashlib

    from specsim import __version__

    # keyed by the data and by the code that fits it (this module and the chain/tree models it uses), so
    # that an edited fit never serves a stale catalogue
    h = hashlib.sha256(Path(path).read_bytes())
    for module in (__file__, *(str(Path(__file__).with_name(n)) for n in ("chain.py", "trees.py"))):
        h.update(Path(module).read_bytes())
    return f"priors-{__version__}-{h.hexdigest()[:16]}.pickle"


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "specsim"


def _read_cache(key: str) -> Catalogue | None:
    """The fitted catalogue from the user cache, or None (absent, unreadable or from other code)."""
    import pickle

    try:
        with open(_cache_dir() / key, "rb") as fh:
            cat = pickle.load(fh)  # a file this code wrote, keyed by the catalogue's hash and our version
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError):
        return None
    return cat if isinstance(cat, Catalogue) else None


def _write_cache(key: str, cat: Catalogue) -> None:
    """Best effort: written atomically (a temporary file, then rename); silently skipped if the cache
    directory cannot be written (a read-only home, a sandbox)."""
    import pickle
    import tempfile

    try:
        folder = _cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".priors-", dir=folder)
        try:
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(cat, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, folder / key)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        for old in folder.glob("priors-*.pickle"):  # earlier catalogues or code: never read again
            if old.name != key:
                old.unlink(missing_ok=True)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        pass


def _build_catalogue(path: str) -> Catalogue:
    """Parse and fit every entry of the catalogue file."""
    import yaml

    with open(path, encoding="utf-8") as fh:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        raw = yaml.load(fh, Loader=loader)  # a safe loader (CSafeLoader when built)
    if not isinstance(raw, list):
        raise SpecsimError(f"{path}: the priors catalogue must be a list of entries")
    ids = [e.get("id") for e in raw]
    if len(set(ids)) != len(ids):
        raise SpecsimError(f"{path}: duplicate prior ids")
    for e in raw:
        if not e.get("source"):
            raise SpecsimError(f"{path}: prior {e.get('id')!r} has no source")
    models = _derive_decay_models(raw)
    entries = tuple(x for x in (_make_entry(e, models) for e in raw) if x is not None)
    ratios, counts = _temperature_ratios(entries)
    return Catalogue(entries, models, ratios, counts, _task_factors(entries), _pair_model(entries), len(raw))


# ---------------------------------------------------------------------------------------------
# the lookup
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RateModel:
    """Conditional per-depth rates with the tau of any shape (a prior's central, low or high case)."""

    conditional_rates: tuple[float, ...]

    def tau_for(self, shape: Shape | Tree | int) -> float:
        return tau_of(self.conditional_rates, shape)

    def unconditional(self, k: int) -> tuple[float, ...]:
        """P(draft i accepted), i = 1..k (vLLM's per-position convention)."""
        return tuple(float(x) for x in np.cumprod(self.conditional_rates[:k]))


@dataclass(frozen=True)
class PriorMatch:
    """The prior chosen for a question, with its band and provenance (see the module docstring)."""

    method: str
    entry_id: str
    entry_ids: tuple[str, ...]
    distance: float
    components: Mapping[str, float]
    central: RateModel
    low: RateModel
    high: RateModel
    measured_depth: int
    sigma: float  # standard deviation of log(tau - 1) the band is drawn from
    reference: Shape
    note: str
    source: str
    adjustments: tuple[str, ...] = ()

    @property
    def conditional_rates(self) -> tuple[float, ...]:
        return self.central.conditional_rates

    def tau_for(self, shape: Shape | Tree | int) -> float:
        return self.central.tau_for(shape)

    def tau_band(self, shape: Shape | Tree | int) -> tuple[float, float, float]:
        """(low, central, high) tokens per step in ``shape``."""
        return self.low.tau_for(shape), self.central.tau_for(shape), self.high.tau_for(shape)

    def profile(self, which: str = "central") -> AcceptanceProfile:
        """An AcceptanceProfile of the central / low / high rates for the planner (no flat tail)."""
        rm = {"central": self.central, "low": self.low, "high": self.high}[which]
        lo, mid, hi = self.tau_band(self.reference)
        src = (f"prior {self.entry_id} ({which}); {self.reference.label()} tau {mid:.2f} "
               f"[{lo:.2f}-{hi:.2f}]")
        return AcceptanceProfile(rm.conditional_rates, None, src, self.note, True)


def _requested_target(target: Any) -> tuple[str, str | None, float | None]:
    if target is None:
        return "", None, None
    if isinstance(target, str):
        return target, family_of(target), params_of_name(target)
    name = str(getattr(target, "name", target))
    params = None
    if hasattr(target, "n_params"):
        try:
            params = float(target.n_params()) / 1e9
        except Exception:  # a partial spec without sizes: fall back to the name
            params = None
    return name, family_of(name), params or params_of_name(name)


def _excluded(e: PriorEntry, exclude: Iterable[str] | Callable[[PriorEntry], bool]) -> bool:
    if callable(exclude):
        return bool(exclude(e))
    return any(x and (x == e.id or x.lower() in e.source.lower()) for x in exclude)


#: Standard deviation of log(tau - 1) contributed by each kind of distance (calibrated on held-out
#: catalogue entries, see tests/acceptance/test_priors.py::test_band_covers_held_out_entries).
SIGMA = {
    "base": 0.08,  # same method, target, draft, task and temperature: run-to-run, prompt subsets, engines
    "lookup_base": 0.35,  # n-gram / suffix / lookahead: acceptance is a property of the workload's repetition
    "method": 0.35,  # per unit of RELATED distance
    "family": 0.30,  # another model family
    "lineage": 0.20,  # another generation of the same lineage (Llama-2 -> Llama-3)
    "size": 0.08,  # per factor e of target size within a family
    "draft": 0.40,  # another draft checkpoint for the same method and target ("draft quality dominates")
    "draft_unknown": 0.22,  # a learned head whose checkpoint was not named: the spread between checkpoints
    "task": 0.22,  # another task, factor applied
    "task_unknown": 0.35,  # another task without a measured factor
    "task_unstated": 0.15,  # the task was not given: the spread between tasks
    "temperature": 0.18,  # per unit of temperature difference, ratio applied
    "temperature_unknown": 0.12,  # the entry's temperature is not stated
    "shape": 0.08,  # converting between chain and tree or past the measured depth
    "quality": 0.8,  # per unit of entry quality (approximate, third-party, assumed shape, bounds)
}
#: Learned drafters whose acceptance depends on the checkpoint (the research notes' "a prior must be
#: keyed by the draft checkpoint"); native MTP modules ship with the model.
CHECKPOINT_METHODS = ("eagle", "eagle2", "eagle3", "hass", "medusa", "hydra", "p_eagle", "dflash", "dspark")


def _components(e: PriorEntry, method: str, fam: str | None, params: float | None, tname: str,
                draft_name: str | None, task: str, temperature: float | None, ref: Shape,
                cat: Catalogue, task_stated: bool = True) -> dict[str, float]:
    c: dict[str, float] = {}
    if e.method != method:
        c["method"] = SIGMA["method"] * RELATED.get(method, {}).get(e.method, 6.0)
    if fam is not None:
        if e.family != fam:
            same_line = _LINEAGE.get(e.family) is not None and _LINEAGE.get(e.family) == _LINEAGE.get(fam)
            c["family"] = SIGMA["lineage"] if same_line else SIGMA["family"]
        if params and e.target_params_b and not _same_model(tname, e.target):
            c["size"] = SIGMA["size"] * min(abs(math.log(params / e.target_params_b)), 3.0)
    if draft_name and not _same_draft(draft_name, e.draft):
        c["draft"] = SIGMA["draft"]
    elif not draft_name and method in CHECKPOINT_METHODS:
        c["draft"] = SIGMA["draft_unknown"]
    if not task_stated:
        # the workload's task is unknown: chat-like and mixed benchmarks stand in for it, with its spread
        c["task"] = SIGMA["task_unstated"] if e.task in ("chat", "mixed") else SIGMA["task_unknown"]
    elif e.task != task:
        known = task in cat.task_factor.get(EFFECT_CLASS.get(method, "head"), {}) and e.task in cat.task_factor.get(
            EFFECT_CLASS.get(method, "head"), {})
        c["task"] = SIGMA["task"] if known else SIGMA["task_unknown"]
        if "mixed" in (e.task, task):
            c["task"] *= 0.5  # a mixed benchmark contains the asked task
    t_req = 0.0 if temperature is None else temperature
    if e.temperature is None:
        c["temperature"] = SIGMA["temperature_unknown"]
    elif abs(e.temperature - t_req) > 1e-9:
        c["temperature"] = SIGMA["temperature"] * abs(e.temperature - t_req)
    if e.shape is not None:
        same = (e.shape.kind == ref.kind and e.shape.depth == ref.depth and e.shape.topk == ref.topk
                and e.shape.num_nodes == ref.num_nodes and e.shape.static == ref.static)
        if same and "tau" in e.published:
            pass  # measured in exactly the asked shape
        elif not ref.is_tree and not e.shape.is_tree and e.measured_depth >= ref.depth:
            c["shape"] = 0.06  # per-position rates covering the asked chain (n-alpha style, not a measured tau)
        else:
            beyond = max(0, ref.depth - max(e.measured_depth, e.shape.depth))
            c["shape"] = SIGMA["shape"] * (1.0 + 0.25 * beyond)
    if e.quality:
        c["quality"] = SIGMA["quality"] * e.quality
    return c


@cache
def _norm_dataset(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


@cache
def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9.]", "", name.lower().split("(")[0].replace("-instruct", "").replace("-chat", ""))


def _same_model(a: str, b: str) -> bool:
    na, nb = _norm(a), _norm(b)
    return bool(na) and (na == nb or na in nb or nb in na)


def _same_draft(asked: str, entry_draft: str) -> bool:
    a, b = asked.lower(), entry_draft.lower()
    return bool(a) and (a in b or b in a or _norm(a) == _norm(b))


def _shift(rates: FloatArray, delta: float | FloatArray) -> FloatArray:
    """Rates moved by ``delta`` in logit space: every position up or down together, never past 0 or 1."""
    r = np.clip(rates, 1e-6, 1.0 - 1e-6)
    return np.clip(1.0 / (1.0 + np.exp(-(np.log(r / (1.0 - r)) + delta))), 0.0, RATE_CAP)


def _scale_to(rates: FloatArray, ratio: float, ref: Shape) -> FloatArray:
    """Rates shifted together (logit space) so that (tau - 1) in ``ref`` changes by ``ratio``.

    A common logit shift keeps the decay shape and, unlike a multiplicative scale, can raise rates
    that are already high without crossing 1. tau is evaluated for a grid of shifts in one vectorised
    call and inverted by interpolation (it increases with the shift); ratios beyond the cap stop there."""
    if abs(ratio - 1.0) < 1e-12:
        return rates
    target = ratio * (tau_of(rates, ref) - 1.0)
    deltas = np.linspace(-10.0, 10.0, 801)
    curve = _tau_grid(_shift(np.asarray(rates)[None, :], deltas[:, None]), ref) - 1.0
    return _shift(rates, float(np.interp(target, curve, deltas)))


def _adjust(e: PriorEntry, method: str, task: str, temperature: float | None, cat: Catalogue
            ) -> tuple[float, list[str]]:
    """(tau - 1) ratio that carries entry e to the asked task and temperature, and what was applied."""
    cls = EFFECT_CLASS.get(method, "head")
    ratio, what = 1.0, []
    factors = cat.task_factor.get(cls, {})
    if e.task != task and task in factors and e.task in factors:
        r = factors[task] / factors[e.task]
        ratio *= r
        what.append(f"task {e.task} -> {task}: (tau-1) x{r:.2f} (median over paired catalogue entries)")
    t_e = 0.0 if e.temperature is None else e.temperature
    t_q = 0.0 if temperature is None else temperature
    if abs(t_e - t_q) > 1e-9:
        r1 = cat.temperature_ratio.get(cls, cat.temperature_ratio.get("head", 0.87))
        r = (1.0 + (r1 - 1.0) * t_q) / (1.0 + (r1 - 1.0) * t_e)  # linear in T between the T=0 and T=1 pairs
        ratio *= r
        what.append(f"temperature {t_e:g} -> {t_q:g}: (tau-1) x{r:.2f} (paired T=0/T=1 entries, {cls})")
    return ratio, what


def lookup(method: str, target: Any = None, draft: Any = None, task: str | None = None,
           temperature: float | None = None, shape: Any = None,
           exclude: Iterable[str] | Callable[[PriorEntry], bool] = ()) -> PriorMatch:
    """The closest sourced prior for a question, with its band (see the module docstring)."""
    cat = load_catalogue()
    m = canonical_method(method)
    if m not in DECAY_GROUP:
        raise SpecsimError(f"no acceptance prior for method {method!r} (known: {', '.join(sorted(DECAY_GROUP))})")
    if temperature is not None and not (0.0 <= float(temperature) <= 2.0):
        raise SpecsimError(f"temperature must lie in [0, 2], got {temperature!r}")
    tname, fam, params = _requested_target(target)
    t = task_of_dataset(task) if task else None
    if task and t is None:
        raise SpecsimError(f"unknown task {task!r} (known: {', '.join(TASKS)})")
    task_ = t or "chat"
    ref = as_shape(shape) if shape is not None and not isinstance(shape, Tree) else chain_shape(5)
    if isinstance(shape, Tree):
        ref = Shape("tree", shape.depth, int(shape.ranks.max(initial=0)) + 1, shape.num_nodes)
    draft_name, draft_params = _draft_of(draft)
    if m == "draft_model" and draft is not None:
        exact = [e for e in cat.entries if e.method == "draft_model" and _same_draft(draft_name or "", e.draft)
                 and not _excluded(e, exclude)]
        if not exact and draft_params is not None:
            kept = [e for e in cat.entries if not _excluded(e, exclude)]
            pm = cat.pair_model if len(kept) == len(cat.entries) else _pair_model(kept)  # held out: refit
            return _pair_match(cat, pm, tname, fam, params, draft_name or "", draft_params, task_, temperature, ref,
                               t is None)
    candidates: list[tuple[float, PriorEntry, dict[str, float]]] = []
    allowed = {m, *RELATED.get(m, {})}
    hint = _norm_dataset(task) if task and str(task).lower() not in TASKS else ""
    for e in cat.entries:
        if e.method not in allowed or e.synthetic or _excluded(e, exclude):
            continue
        comps = _components(e, m, fam, params, tname, draft_name, task_, temperature, ref, cat, t is not None)
        if hint and hint not in _norm_dataset(e.dataset):
            comps["dataset"] = 0.06  # the same task on another benchmark (MT-bench vs Alpaca: both chat)
        candidates.append((sum(comps.values()), e, comps))
    if not candidates:
        raise SpecsimError(f"no acceptance prior in the catalogue for {m} (all candidates excluded)")
    candidates.sort(key=lambda c: (c[0], c[1].quality, c[1].id))
    best = candidates[0][0]
    # near-equals: their median (each carried to the asked task and temperature) is the central case. The
    # window grows with the distance: an exact match stands alone; an unnamed checkpoint pools checkpoints.
    ties = [c for c in candidates if c[0] <= best + 0.03 + 0.25 * best]
    # the tie set's entries, each carried to the asked task / temperature, evaluated in the reference shape
    carried = []
    for _, e, comps in ties:
        ratio, what = _adjust(e, m, task_, temperature, cat)
        rates = _scale_to(np.asarray(e.rates), ratio, ref if ref.depth else chain_shape(5))
        carried.append((math.log(max(tau_of(rates, ref) - 1.0, 1e-6)), e, comps, rates, what))
    values = np.array([c[0] for c in carried])
    median = float(np.median(values))
    rep = min(carried, key=lambda c: (abs(c[0] - median), c[1].quality, c[1].id))
    _, e, comps, rates, what = rep
    spread = float(np.std(values)) if len(values) > 1 else 0.0
    base = SIGMA["lookup_base"] if EFFECT_CLASS.get(m, "head") == "lookup" else SIGMA["base"]
    sigma = math.sqrt(base ** 2 + sum(v ** 2 for v in comps.values()) + spread ** 2)
    if temperature is None and EFFECT_CLASS.get(m, "head") != "lookup":
        # temperature not given: the low side reaches the T=1 value
        r1 = cat.temperature_ratio.get(EFFECT_CLASS.get(m, "head"), 0.87)
        sigma_low = math.sqrt(sigma ** 2 + math.log(r1) ** 2)
    else:
        sigma_low = sigma
    central = np.asarray(rates)
    low = _scale_to(central, math.exp(-BAND_Z * sigma_low), ref)
    high = _scale_to(central, math.exp(BAND_Z * sigma), ref)
    lo_t, mid_t, hi_t = tau_of(low, ref), tau_of(central, ref), tau_of(high, ref)
    parts = [f"{m} acceptance prior {e.id}: {e.source}"]
    if e.shape is not None:
        parts.append(f"measured as a {e.shape.label()}" + (f" ({e.shape.assumed})" if e.shape.assumed else ""))
    parts.append(f"rates: {e.fit}")
    if what:
        parts.append("carried: " + "; ".join(what))
    gaps = [k for k in comps if k not in ("quality",)]
    if gaps:
        parts.append("differs in " + ", ".join(gaps))
    if t is None:
        parts.append("task not given: chat assumed")
    if temperature is None:
        parts.append("temperature not given: greedy central, band down to T=1")
    if ref.depth > max(e.measured_depth, e.shape.depth if e.shape else 0):
        parts.append(f"positions past {max(e.measured_depth, e.shape.depth if e.shape else 0)} follow the decay "
                     "model, not a flat rate")
    parts.append(f"{ref.label()}: tau {mid_t:.2f}, band {lo_t:.2f}-{hi_t:.2f}")
    parts.append(MEASURE_YOURS)
    return PriorMatch(
        method=m, entry_id=e.id, entry_ids=tuple(c[1].id for c in carried), distance=float(sum(comps.values())),
        components=dict(comps), central=RateModel(tuple(float(x) for x in central)),
        low=RateModel(tuple(float(x) for x in low)), high=RateModel(tuple(float(x) for x in high)),
        measured_depth=e.measured_depth, sigma=sigma, reference=ref, note="; ".join(parts), source=e.source,
        adjustments=tuple(what))


def _draft_of(draft: Any) -> tuple[str | None, float | None]:
    if draft is None:
        return None, None
    if isinstance(draft, str):
        return draft, params_of_name(draft)
    if isinstance(draft, Mapping):
        name = str(draft.get("name") or "")
        p = _num(draft.get("params_b"))
        return name, p if p is not None else params_of_name(name)
    name, _, params = _requested_target(draft)
    return name, params


def _pair_match(cat: Catalogue, pm: PairModel, tname: str, fam: str | None, params: float | None, draft_name: str,
                draft_params: float, task: str, temperature: float | None, ref: Shape, task_assumed: bool
                ) -> PriorMatch:
    """Draft-model acceptance from the pair model (no catalogue entry for this pair)."""
    if params is None:
        raise SpecsimError(f"the draft-model pair model needs the target's size ({tname or 'target'} unknown)")
    alpha0 = pm.alpha(params, draft_params)
    rates = np.full(MAX_DEPTH, alpha0)
    cls = "draft_model"
    what = []
    factors = cat.task_factor.get(cls, {})
    ratio = 1.0
    if task != "chat" and task in factors:
        ratio *= factors[task]
        what.append(f"task chat -> {task}: (tau-1) x{factors[task]:.2f}")
    if temperature:
        r1 = cat.temperature_ratio.get(cls, 0.66)
        ratio *= 1.0 + (r1 - 1.0) * float(temperature)
        what.append(f"temperature 0 -> {float(temperature):g}: (tau-1) x{1.0 + (r1 - 1.0) * float(temperature):.2f}")
    rates = _scale_to(rates, ratio, ref)
    dfam = family_of(draft_name)
    comps = {"pair": pm.spread / 0.07 * 0.1 + 0.15}
    if fam is not None and _LINEAGE.get(dfam, dfam) != _LINEAGE.get(fam, fam):
        comps["family"] = SIGMA["family"]
    sigma = math.sqrt(SIGMA["base"] ** 2 + sum(v ** 2 for v in comps.values()))
    sigma_low = math.sqrt(sigma ** 2 + (math.log(cat.temperature_ratio.get(cls, 0.66)) ** 2 if temperature is None
                                        else 0.0))
    low = _scale_to(rates, math.exp(-BAND_Z * sigma_low), ref)
    high = _scale_to(rates, math.exp(BAND_Z * sigma), ref)
    lo_t, mid_t, hi_t = tau_of(low, ref), tau_of(rates, ref), tau_of(high, ref)
    note = "; ".join(filter(None, [
        f"draft_model acceptance for {draft_name} -> {tname}: not measured for this pair; predicted from the size "
        f"ratio {params / draft_params:.0f}x by the pair model alpha = {pm.intercept:.2f} - {pm.slope:.3f} "
        f"log10(target/draft) = {alpha0:.2f} (common slope over {pm.series} published series, {pm.points} pairs: "
        "Leviathan et al. 2022 Table 3, e.g. LaMDA 137B with 100M / 2B / 8B drafts alpha 0.61 / 0.71 / 0.75; "
        "T5-XXL with T5-small/base/large; Vicuna-68M for Vicuna-7B/13B)",
        "caveat: the pairs are older models; a draft distilled from its target accepts more, one from another "
        "family or tokenizer less",
        "; ".join(what),
        "task not given: chat assumed" if task_assumed else "",
        "temperature not given: greedy central, band down to T=1" if temperature is None else "",
        f"{ref.label()}: tau {mid_t:.2f}, band {lo_t:.2f}-{hi_t:.2f}",
        MEASURE_YOURS,
    ]))
    return PriorMatch(
        method="draft_model", entry_id="pair-model", entry_ids=pm.evidence, distance=float(sum(comps.values())),
        components=comps, central=RateModel(tuple(float(x) for x in rates)),
        low=RateModel(tuple(float(x) for x in low)), high=RateModel(tuple(float(x) for x in high)),
        measured_depth=MAX_DEPTH, sigma=sigma, reference=ref, note=note,
        source="pair model over Leviathan et al. 2022 Table 3 and the catalogue's draft-model pairs",
        adjustments=tuple(what))


def extend_profile(profile: AcceptanceProfile, method: str, depth: int = MAX_DEPTH) -> AcceptanceProfile:
    """A measured profile continued past its measured depth by the method's decay model, with a note.

    Profiles with an i.i.d. tail or already at ``depth`` are returned unchanged.
    """
    if profile.tail is not None or len(profile.rates) >= depth or not profile.rates:
        return profile
    cat = load_catalogue()
    model = cat.decay.get(DECAY_GROUP.get(canonical_method(method), "iid"), cat.decay["iid"])
    rates = model.extend(profile.rates, depth)
    n = len(profile.rates)
    note = (f"{profile.note + '; ' if profile.note else ''}measured to k = {n}; deeper positions follow the "
            f"{model.describe()}")
    return AcceptanceProfile(tuple(float(x) for x in rates), None, profile.source, note, profile.prior)


@dataclass(frozen=True)
class Reproduction:
    """An entry fed back in its own source shape: the model's figure against the published one."""

    entry_id: str
    quantity: str
    published: float
    model: float

    @property
    def rel_error(self) -> float:
        """model / published - 1 (the absolute difference when the published figure is 0)."""
        return self.model / self.published - 1.0 if self.published else self.model - self.published


def reproduce(entry: PriorEntry) -> list[Reproduction]:
    """The entry's published figures recomputed from its fitted rates in its own shape."""
    out = []
    pub = entry.published
    if "tau" in pub and entry.shape is not None:
        out.append(Reproduction(entry.id, "tau", float(pub["tau"]), entry.tau_for(entry.shape)))
    if "conditional" in pub:
        for i, c in enumerate(pub["conditional"]):
            out.append(Reproduction(entry.id, f"c{i + 1}", float(c), entry.rates[i]))
    if "alpha" in pub:
        out.append(Reproduction(entry.id, "alpha", float(pub["alpha"]), entry.rates[0]))
    return out


@dataclass(frozen=True)
class CatalogueSummary:
    """Counts for a report: entries by method and by what they measured."""

    by_method: Mapping[str, int] = field(default_factory=dict)
    by_fit: Mapping[str, int] = field(default_factory=dict)


def summary() -> CatalogueSummary:
    cat = load_catalogue()
    by_method: dict[str, int] = defaultdict(int)
    by_fit: dict[str, int] = defaultdict(int)
    for e in cat.entries:
        by_method[e.method] += 1
        by_fit["per-position" if 0 < e.measured_depth < MAX_DEPTH else "alpha" if e.measured_depth else "tau"] += 1
    return CatalogueSummary(dict(by_method), dict(by_fit))

"""The registry of draft-method names for acceptance (one ``MethodInfo`` per method), and the names
of tasks, model families and sizes the catalogue is keyed by.

Method names are compared as strings only here and at the input edge: everything else asks
``method_info(name)`` for the method's attributes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from specsim.acceptance.priors.shapes import (
    EAGLE1_TREE,
    EAGLE2_PAPER_TREE,
    EAGLE3_PAPER_TREE,
    MEDUSA_TREE,
    Shape,
)

# ---------------------------------------------------------------------------------------------
# methods
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MethodInfo:
    """What acceptance needs to know about a draft method."""

    name: str  # the catalogue's spelling
    aliases: tuple[str, ...] = ()
    #: Decay-model group: whose per-position measurements give the method's decay shape.
    decay_group: str = "iid"
    #: How task and temperature move acceptance: learned heads (head), standalone draft models
    #: (draft_model), or lookup of text that already exists (lookup) — the research notes' three regimes.
    effect_class: str = "head"
    #: A learned drafter whose acceptance depends on the checkpoint (the research notes' "a prior must
    #: be keyed by the draft checkpoint"); native MTP modules ship with the model.
    checkpoint: bool = False
    #: A standalone draft model: without a measured pair, acceptance follows the target/draft size ratio.
    sized_draft: bool = False
    #: Drafts a block in one pass (acceptance as a chain).
    parallel: bool = False
    #: Methods whose measurements stand in for this one's, with the distance added.
    related: Mapping[str, float] = field(default_factory=dict)
    #: The tree the method's published implementation verifies when a source names none.
    default_tree: Shape | None = None
    #: Its paper's tree size depends on the target's size (EAGLE-2 App. A: 60 / 50 / 48 tokens).
    sized_tree: bool = False
    #: Drafts per step (and why) when a source gives no depth.
    default_depth: int = 5
    default_depth_why: str = "k not stated: 5 assumed"


def _spec_bench_tree(method: str) -> Shape:
    return replace(EAGLE2_PAPER_TREE, assumed=f"Spec-Bench default {method} tree not stated; a 60-token depth-6 "
                   "tree like EAGLE-2's assumed")


#: EAGLE-2 runs EAGLE-1's draft head (Li et al. 2024, EAGLE-2 Sec. 4: "the same draft model as EAGLE"),
#: so only the tree differs, and the tree is modelled explicitly; the other relations are stated
#: approximations.
_METHODS = (
    MethodInfo("eagle", ("eagle1", "eagle-1"), "eagle", checkpoint=True,
               related={"eagle2": 0.15, "hass": 0.8, "sam_eagle2": 1.0}, default_tree=EAGLE1_TREE,
               default_depth=5, default_depth_why="k not stated: EAGLE's 5 draft passes assumed"),
    MethodInfo("eagle2", ("eagle-2",), "eagle", checkpoint=True, related={"eagle": 0.15, "hass": 0.8,
               "sam_eagle2": 1.0}, default_tree=EAGLE2_PAPER_TREE, sized_tree=True),
    MethodInfo("hass", (), "eagle", checkpoint=True, related={"eagle2": 0.8, "eagle": 0.8},
               default_tree=EAGLE2_PAPER_TREE),
    MethodInfo("eagle3_ablation", (), "eagle"),
    MethodInfo("sam_eagle2", ("sam",), "eagle", default_tree=_spec_bench_tree("sam_eagle2")),
    MethodInfo("hydra", (), "eagle", checkpoint=True, related={"medusa": 1.5},
               default_tree=replace(MEDUSA_TREE, assumed="Hydra's default tree taken as Medusa's 63-node tree "
                                    "(Hydra builds on Medusa's code and trees)")),
    MethodInfo("eagle3", ("eagle-3", "eagle_3"), "eagle3", checkpoint=True, related={"eagle2": 1.5, "hass": 1.5},
               default_tree=EAGLE3_PAPER_TREE, default_depth=3,
               default_depth_why="k not stated: 3 assumed (vLLM/SGLang chain default in the recipes)"),
    MethodInfo("mtp", ("deepseek_mtp", "nextn"), "mtp", related={"eagle3": 1.5}, default_depth=3,
               default_depth_why="k not stated: 3 drafted tokens assumed (the engines' usual MTP setting, SGLang "
               "cookbook --speculative-num-steps 3)"),
    MethodInfo("medusa", ("medusa1", "medusa-1", "medusa2", "medusa-2"), "medusa", checkpoint=True,
               related={"hydra": 1.5}, default_tree=MEDUSA_TREE),
    MethodInfo("p_eagle", ("p-eagle", "peagle"), "eagle3", checkpoint=True, parallel=True,
               related={"dflash": 1.2, "dspark": 1.2, "eagle3": 1.5}, default_depth=7,
               default_depth_why="K not stated: 7 assumed (vLLM P-EAGLE post)"),
    MethodInfo("dflash", (), "dflash", checkpoint=True, parallel=True, related={"dspark": 1.0, "p_eagle": 1.2},
               default_depth=7, default_depth_why="block size not stated: 7 drafts per block assumed (vLLM DFlash "
               "recipes)"),
    MethodInfo("dspark", (), "dspark", checkpoint=True, parallel=True, related={"dflash": 1.0, "p_eagle": 1.2},
               default_depth=7, default_depth_why="block size not stated: 7 drafts per block assumed"),
    MethodInfo("draft_model", ("draft", "sps", "standalone", "draft-model", "sequoia"), "iid", "draft_model",
               sized_draft=True, default_depth=5,
               default_depth_why="HF assisted generation num_assistant_tokens = 5 (transformers GenerationConfig), "
               "which Spec-Bench's and EAGLE-2's SpS baselines run"),
    MethodInfo("pard", ("pard_draft",), "iid", "draft_model", sized_draft=True, parallel=True,
               related={"draft_model": 1.0}, default_depth=12,
               default_depth_why="k not stated: the PARD reference loop's draft_k = 12 (AMD-AIG-AIMA/PARD README)"),
    MethodInfo("self_spec_sparse_kv", ("magicdec",), "iid", "draft_model"),
    MethodInfo("lookahead", (), "iid", "lookup", default_depth=4,
               default_depth_why="lookahead decoding defaults (hao-ai-lab/LookaheadDecoding, Spec-Bench: level "
               "N = 5, k = N - 1 = 4 positions per guess, window 7, guesses 7)"),
    MethodInfo("ngram", ("pld", "prompt_lookup", "n-gram", "n_gram"), "lookup", "lookup", related={"suffix": 1.5},
               default_depth=10, default_depth_why="prompt lookup decoding defaults (apoorvumang/prompt-lookup-"
               "decoding: max n-gram 3, 10 continuation tokens), as run by Spec-Bench"),
    MethodInfo("suffix", ("suffix_decoding",), "lookup", "lookup", related={"ngram": 1.5}),
    MethodInfo("rest", (), "lookup", "lookup", default_tree=_spec_bench_tree("rest")),
    MethodInfo("token_recycling", ("recycling",), "lookup", "lookup", default_tree=_spec_bench_tree("token_recycling")),
)
#: Every draft method the catalogue knows, by its catalogue spelling.
METHODS: Mapping[str, MethodInfo] = {m.name: m for m in _METHODS}
_ALIASES = {a: m.name for m in _METHODS for a in m.aliases}


def canonical_method(method: str) -> str:
    """A method name in the catalogue's spelling (``eagle-3`` -> ``eagle3``, ``pld`` -> ``ngram``)."""
    m = str(method).strip().lower().replace(" ", "_")
    return _ALIASES.get(m, _ALIASES.get(m.replace("_", "-"), m))


def method_info(method: str) -> MethodInfo:
    """The registry's entry for a method (any spelling); a method it does not know gets the defaults
    (i.i.d. decay, a learned head's task and temperature effects)."""
    m = canonical_method(method)
    return METHODS.get(m) or MethodInfo(m)


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


def lineage_of(family: str) -> str | None:
    """The training lineage of a family (llama2, llama3 -> llama), or None when it has none listed."""
    return _LINEAGE.get(family)


_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([bm])\b", re.I)


def params_of_name(name: str) -> float | None:
    """Parameters in billions read from a name (``llama-3.2-1b`` -> 1.0, ``vicuna-68m`` -> 0.068)."""
    hits = _SIZE.findall(str(name).lower().replace("x", " "))
    if not hits:
        return None
    value, unit = hits[-1] if not re.search(r"-a\d", str(name).lower()) else hits[0]
    return float(value) / (1000.0 if unit.lower() == "m" else 1.0)

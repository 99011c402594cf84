"""The CLI's one vocabulary (README, "One CLI vocabulary"): every command spells a shared option the
same way, with the same meaning, so that each is defined once here.

Rule for lists: option names are singular; an option that is an axis of the output (``--tokens`` in
ops/forward; ``--batch``, ``--context``, ``--alpha-grid`` in sweep) takes a list (1,2,4 | 1-16 |
1:16:4 | 1:4096:x2), anywhere else one value.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated

import typer

from specsim.errors import SpecsimError

if TYPE_CHECKING:
    from specsim.scenario.scenario import Scenario

FORMAT_HELP = "table | csv | json | markdown"
MAX_BATCH = 1_000_000
MAX_CONTEXT = 1_000_000_000

Fmt = Annotated[str, typer.Option("--format", "-f", help=FORMAT_HELP)]
Hardware = Annotated[str, typer.Option("--hardware", "-H", help="profile name or path to a YAML")]
Model = Annotated[str, typer.Option("--model", "-m", help="catalogue name or path to a config.json (or its folder)")]
Tp = Annotated[int, typer.Option("--tp", help="tensor-parallel degree (divides the attention heads)")]
WeightDtype = Annotated[str | None, typer.Option(
    "--weight-dtype", help="weight format: bf16 (default) | fp8 | fp8_block | int8 | int4 | w4a8 | nvfp4 | mxfp4 | "
    "native (the checkpoint's own), or per part: fp8,experts=nvfp4 (attention, dense, experts, head, mtp)")]
DtypeAlias = Annotated[str | None, typer.Option("--dtype", hidden=True, help="old name of --weight-dtype")]
KvDtype = Annotated[str, typer.Option("--kv-dtype", help="KV-cache dtype: bf16 | fp8")]
Batch = Annotated[int, typer.Option("--batch", "-b", help="sequences per step")]
Context = Annotated[int, typer.Option("--context", "-L", help="KV-cache length each sequence attends to (tokens)")]
Tokens = Annotated[str, typer.Option("--tokens", help="new tokens per sequence (a list): 1,2,4 or 1-16 or 1:4096:x2")]
Engine = Annotated[str | None, typer.Option(
    "--engine", "-e", help="serving engine: vllm | sglang | trtllm | hf | hf-naive | a versioned name "
                           "(specsim engines list) | a profile YAML; default: the scenario's (vllm)")]
CostModel = Annotated[str | None, typer.Option(
    "--cost-model", help="roofline | table (NVIDIA's measured kernel tables via aiconfigurator-core, the roofline "
                         "outside them); default: the hardware profile's")]


def weight_dtype(value: str | None, alias: str | None) -> str:
    """--weight-dtype, or its hidden old name --dtype: a weight format, `native` (the checkpoint's own) or a
    format per part (`fp8,experts=nvfp4`), checked (an empty value is refused); bf16 when neither is given."""
    from specsim.cost.dtypes import WEIGHT_BYTES, check_precision

    if value is not None and alias is not None and value != alias:
        raise SpecsimError(f"give --weight-dtype only (--dtype is its old name), got {value!r} and {alias!r}")
    for given, option in ((value, "--weight-dtype"), (alias, "--dtype")):
        if given is not None:
            try:
                check_precision(str(given))
            except SpecsimError:
                raise SpecsimError(f"{option} must be one of {' | '.join(WEIGHT_BYTES)} | native, or a format per part "
                                   f"(fp8,experts=nvfp4), got {given!r}") from None
    return value or alias or "bf16"


def check_batch_context(batch: int, context: int) -> None:
    """SpecsimError unless 1 <= --batch <= MAX_BATCH and 0 <= --context <= MAX_CONTEXT."""
    if not 1 <= batch <= MAX_BATCH:
        raise SpecsimError(f"--batch must be in [1, {MAX_BATCH:,}], got {batch:,}")
    if not 0 <= context <= MAX_CONTEXT:
        raise SpecsimError(f"--context must be in [0, {MAX_CONTEXT:,}], got {context:,}")


def overridden(s: Scenario, cost_model: str | None = None, engine: str | None = None) -> Scenario:
    """The scenario priced with --cost-model and run by --engine (the scenario's own where None)."""
    if cost_model is not None:
        s = dataclasses.replace(s, hardware=s.hardware.with_cost_model(cost_model))
    if engine is not None:
        from specsim.engines.profile import load_engine

        s = dataclasses.replace(s, engine=load_engine(engine))
    return s


# The parallel layout beside --tp (cost/layout.py): one option each, shared by the commands that price a target.
Dp = Annotated[int, typer.Option("--dp", help="data-parallel attention groups of --tp GPUs each (SGLang "
                                 "--enable-dp-attention: its --tp 8 --dp 8 is --tp 1 --dp 8 here)")]
Ep = Annotated[int, typer.Option("--ep", help="expert parallelism: experts split over EP of the tp x dp GPUs")]
Pp = Annotated[int, typer.Option("--pp", help="pipeline stages (layers split in sequence)")]
Cp = Annotated[int, typer.Option("--cp", help="decode context parallelism: KV split over CP of the tp GPUs")]
LayerSplit = Annotated[bool, typer.Option("--layer-split", help="with --pp: one microbatch through the stages, "
                                          "one GPU busy at a time (Hugging Face device_map)")]

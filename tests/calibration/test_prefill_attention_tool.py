"""tools/prefill_attention.py writes its fitted values into the right efficiency block of a profile's YAML."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml

SPEC = importlib.util.spec_from_file_location("prefill_attention",
                                              Path(__file__).parents[2] / "tools" / "prefill_attention.py")
assert SPEC is not None and SPEC.loader is not None
tool = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(tool)

TEXT = """name: x
efficiency:
  attention_compute: 0.5  # old
  attention_memory: 0.9
frameworks:
  sglang:
    efficiency:
      attention_compute: 0.6
      attention_softmax_ops: 2.0
      attention_memory: 0.8
  trtllm:
    efficiency:
      attention_compute: 0.4
"""


def test_set_block_writes_each_framework_block() -> None:
    vals = {"attention_compute": 0.9, "attention_softmax_ops": 0.7, "attention_prefill_cta_us": 1.5}
    out = tool.set_block(TEXT, "vllm", vals)
    out = tool.set_block(out, "sglang", {**vals, "attention_softmax_ops": 0.0})
    d = yaml.safe_load(out)
    assert d["efficiency"] == {"attention_compute": 0.9, "attention_softmax_ops": 0.7,
                               "attention_prefill_cta_us": 1.5, "attention_memory": 0.9}
    sg = d["frameworks"]["sglang"]["efficiency"]
    assert sg == {"attention_compute": 0.9, "attention_softmax_ops": 0.0, "attention_prefill_cta_us": 1.5,
                  "attention_memory": 0.8}
    assert d["frameworks"]["trtllm"]["efficiency"] == {"attention_compute": 0.4}  # untouched
    assert out.count("attention_softmax_ops") == 2

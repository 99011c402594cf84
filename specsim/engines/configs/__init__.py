"""A plan's policy rendered as engine configuration: one home per engine (vllm.py, trtllm.py, sglang.py),
what they share (bands.py: the bands a policy gives them), all of them together (render.py) and their files
(layout.py).

Knob names from the engines' docs and config classes (../shared/research/anchors.md §3). vLLM and
TensorRT-LLM change the chain length per batch; a tree is one static shape, the low-load one. SGLang has no
per-batch schedule: it gets one server configuration per batch band of the policy.

The writers take plain typed inputs (`bands.Speculation`); the caller builds them (plan/engine_configs.py),
the tree's node paths included, since those need acceptance/, which sits above engines/.
"""

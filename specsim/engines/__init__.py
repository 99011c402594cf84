"""Serving engines as data: how vLLM, SGLang, TensorRT-LLM and eager research loops run a step
(CUDA graphs and padding, host overheads and overlap, the drafting loop, the all-reduce kind), the
pricing of a pass and a step as each runs it, and each engine's configuration writer (configs/).
Depends on cost/ and the bottom floor (errors, files, records) only."""

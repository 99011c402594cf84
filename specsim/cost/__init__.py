"""The cost of one forward pass: hardware profiles, model specs, ops, the kernel timings (roofline,
attention, moe) and the cost models over them (costmodel, table_model), the pass.

Arrows point one way: hardware, model -> kernel timings -> cost models -> ops -> forward. Nothing here
knows about drafts, acceptance or plans.
"""

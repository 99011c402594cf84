"""The cost of one forward pass: hardware profiles, model specs, ops, the roofline, the pass.

Arrows point one way: hardware, model -> ops -> roofline -> forward. Nothing here knows about
drafts, acceptance or plans.
"""

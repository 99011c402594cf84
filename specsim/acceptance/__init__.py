"""How many tokens a speculative step emits: chains, trees, engine metrics, the exact sampling
reference and its checks. Independent of costs."""

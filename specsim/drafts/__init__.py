"""Draft methods: one family per module (families/), registered by method name (registry.py); what each
costs per step (through the cost model), what it accepts, its memory."""

"""Draft methods: what each costs per step (through the cost model), what it accepts, its memory."""

"""One module per report section; each `*_section(ctx)` returns a `Section` (Markdown and a figure)."""

"""Capacity-planning reports: one module per section, figures, the HTML writer."""

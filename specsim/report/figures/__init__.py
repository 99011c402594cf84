"""Figures for reports and notebooks: pure functions of the data they are given, each returning a
matplotlib Figure drawn on an Agg canvas (object API: no pyplot state, no display, and importing
this module leaves the global backend alone, so notebooks keep their inline plots).

Every figure has a title, axis labels with units and a legend wherever it draws more than one
series; `report.py` computes the data, these functions only draw it. One module per figure of a report
section (`verification`, `speedup`, `heatmap`, `policy`, `sensitivity`, `memory`, `capacity`), the shared
helpers in `drawing`, PNG files written by `saving`.
"""

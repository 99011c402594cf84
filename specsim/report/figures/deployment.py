"""A fitted deployment's runs over the frontier it implies: output throughput against mean TPOT, the measured runs
as points (filled: fitted; the deployment file's residuals), the predicted curve per arm with its 80% band."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from specsim.report.figures.drawing import SERIES, new_figure, wrap_title

Z80 = 1.2816  # the standard normal's 90th percentile: an 80% central band


def deployment_runs(curves: dict[str, np.ndarray], measured: dict[str, np.ndarray], sigma_log: float,
                    title: str) -> Figure:
    """`curves[arm]`: predicted (tok/s, TPOT ms) per load; `measured[arm]`: the runs' (tok/s, TPOT ms)."""
    fig, (ax,) = new_figure(7.2, 4.6)
    for arm in ("off", "on"):
        colour = SERIES[7] if arm == "off" else SERIES[0]
        if arm in curves and len(curves[arm]):
            x, y = curves[arm][:, 0], curves[arm][:, 1]
            ax.plot(x, y, "-", color=colour, lw=1.8, label=f"predicted, speculation {arm}")
            band = np.exp(Z80 * sigma_log)
            ax.fill_between(x, y / band, y * band, color=colour, alpha=0.15, lw=0)
        if arm in measured and len(measured[arm]):
            ax.plot(measured[arm][:, 0], measured[arm][:, 1], "o", color=colour, ms=6,
                    label=f"measured runs, speculation {arm}")
    ax.set_xlabel("output throughput (tokens/s, one replica)")
    ax.set_ylabel("mean TPOT (ms)")
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(wrap_title(title, 7.2, 10), fontsize=10)
    return fig

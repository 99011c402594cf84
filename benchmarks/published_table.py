"""The README's accuracy table: `specsim validate --published` per source group, both modes side by side.

    python benchmarks/published_table.py        # Markdown on stdout
"""

from __future__ import annotations

import json
import subprocess
import sys


def _cell(g: dict | None) -> str:
    if not g or not g["n"]:
        return "—"
    return f"{g['n']}: {100 * g['median_abs_error']:.1f}% / {100 * g['median_bias']:+.1f}%"


def main() -> None:
    out = subprocess.run([sys.executable, "-m", "specsim", "validate", "--published", "-f", "json"],
                         check=True, capture_output=True, text=True).stdout
    data = json.loads(out)
    by: dict[str, dict[str, dict]] = {}
    meta: dict[str, dict] = {}
    for g in data["groups"]:
        if g["n"]:
            by.setdefault(g["group"], {})[g["mode"]] = g
            meta[g["group"]] = g
    print("| group | role | hardware | measured acceptance: n, median \\|error\\| / bias "
          "| priors: n, median \\|error\\| / bias |")
    print("|---|---|---|---|---|")
    for name in sorted(by, key=lambda n: (meta[n]["role"] != "fit", n)):
        g = meta[name]
        role = "fit (in-sample)" if g["role"] == "fit" else "check (held out)"
        hw = "stated" if g["hardware_stated"] else "not stated"
        print(f"| {name} | {role} | {hw} | {_cell(by[name].get('measured'))} | {_cell(by[name].get('priors'))} |")
    o = data["overall"]
    print(f"| **overall (hardware stated)** | all | stated | **{_cell(o['measured'])}** | **{_cell(o['priors'])}** |")


if __name__ == "__main__":
    main()

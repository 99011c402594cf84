"""The README's accuracy table: `specsim validate --published` per source group, both modes side by side.

    python benchmarks/published_table.py        # Markdown on stdout

The table is written into the README by tools/readme_figures.py (one renderer: tools/readme_fast.published_table).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools.readme_common import specsim_json
from tools.readme_fast import published_table


def main() -> None:
    print(published_table(specsim_json("validate", "--published")))


if __name__ == "__main__":
    main()

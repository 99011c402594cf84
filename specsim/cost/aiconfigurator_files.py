"""Where NVIDIA's measured kernel tables (aiconfigurator-core) are, and which exist: the installed package
located (never imported: importing it loads its Rust extension), its systems, frameworks and versions, and the
one refusal when the ``tables`` extra is missing (`require_tables`). Reading them is aiconfigurator.py's.

The layout is aiconfigurator's own: ``systems/data/<system>/<family>/<framework>/<version>/<table>.parquet``
(provenance in the path; ai-dynamo/aiconfigurator ``src/aiconfigurator/systems``)."""

from __future__ import annotations

import functools
import importlib.util
import os
import re
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from specsim.errors import SpecsimError, missing_extra

#: aiconfigurator system -> specsim profile name; others map to ``name.replace("_", "-")``.
DEVICE_MAP: dict[str, str] = {
    "h100_sxm": "h100-sxm", "h100_pcie": "h100-pcie", "h200_sxm": "h200", "a100_sxm": "a100-sxm-80gb",
    "a100_pcie": "a100-pcie", "b200_sxm": "b200", "b300_sxm": "b300", "gb200": "gb200", "gb300": "gb300",
    "l40s": "l40s", "l4": "l4", "rtx_pro_6000_server": "rtx-pro-6000",
}
#: specsim family -> (op-family directory, table file) pairs.
FAMILIES: dict[str, tuple[tuple[str, str], ...]] = {
    "gemm": (("gemm", "gemm_perf.parquet"),),
    "attention": (("attention", "generation_attention_perf.parquet"),
                  ("attention", "context_attention_perf.parquet")),
    "moe": (("moe", "moe_perf.parquet"),),
    "allreduce": (("comm", "custom_allreduce_perf.parquet"), ("comm", "nccl_perf.parquet")),
    "mla": (("mla", "generation_mla_perf.parquet"),),
}
#: What `specsim import aiconfigurator` writes unless told (the measurement schema's ops; MLA decode rows are op
#: "mla", read by the table cost model).
DEFAULT_FAMILIES = ("gemm", "attention", "moe", "allreduce")
FRAMEWORKS = ("sglang", "vllm", "trtllm", "nccl")
#: The package and the extra that installs it (pyproject.toml `tables`).
PACKAGE = "aiconfigurator-core"


def installed_version() -> str | None:
    """aiconfigurator-core's version, or None when it is not installed."""
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover
        return None
    try:
        return version("aiconfigurator-core")
    except PackageNotFoundError:
        return None


def require_tables(for_what: str) -> None:
    """Nothing when aiconfigurator-core and pyarrow are installed; else the one-line refusal naming the `tables`
    extra and the command that installs it (errors.missing_extra). A data folder named by
    ``AICONFIGURATOR_DATA_ROOT`` stands in for the package (`data_root`)."""
    if not os.environ.get("AICONFIGURATOR_DATA_ROOT") and (
            installed_version() is None or importlib.util.find_spec("aiconfigurator_core") is None):
        raise missing_extra("tables", PACKAGE, for_what)
    if importlib.util.find_spec("pyarrow") is None:
        raise missing_extra("tables", "pyarrow", for_what)


def data_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The folder of ``<system>/<family>/<framework>/<version>/*.parquet``: ``root``, else the env
    variable ``AICONFIGURATOR_DATA_ROOT``, else the installed package's ``systems/data``."""
    root = root or os.environ.get("AICONFIGURATOR_DATA_ROOT")
    if root is None:
        spec = importlib.util.find_spec("aiconfigurator_core")
        if spec is None or not spec.submodule_search_locations:
            raise missing_extra("tables", PACKAGE, "reading NVIDIA's tables")
        root = Path(next(iter(spec.submodule_search_locations))) / "systems" / "data"
    path = Path(root)
    if not path.is_dir():
        raise SpecsimError(f"{path}: no aiconfigurator data folder there")
    return path


def parquet() -> Any:
    """pyarrow.parquet, or the missing-extra refusal."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise missing_extra("tables", "pyarrow", "reading NVIDIA's tables") from None
    return pq


def device_name(system: str) -> str:
    return DEVICE_MAP.get(system, system.replace("_", "-"))


def system_name(name: str) -> str:
    """aiconfigurator system for a specsim profile name (or an aiconfigurator name, unchanged)."""
    inverse = {v: k for k, v in DEVICE_MAP.items()}
    return inverse.get(name, name)


def available_systems(root: str | os.PathLike[str] | None = None) -> list[str]:
    """Systems with at least one table (a100_pcie, a30 and l4 ship none in 0.12.0)."""
    base = data_root(root)
    return sorted(d.name for d in base.iterdir() if d.is_dir() and any(d.glob("*/*/*/*.parquet")))


_VERSION = re.compile(r"^v?(\d+(?:\.\d+)*)(.*)$")


@functools.lru_cache(maxsize=4096)  # pure in its string; the tables map it over every row
def version_key(v: str) -> tuple[tuple[int, ...], tuple[int, int], str]:
    """Sort key for framework versions: 1.3.0rc10 < 1.3.0rc20 < 1.3.0 < 1.3.0.post1; dev before rc."""
    m = _VERSION.match(str(v))
    if not m:
        return ((), (-1, 0), str(v))
    release = tuple(int(x) for x in m.group(1).split("."))
    release = release + (0,) * (4 - len(release))
    rest = m.group(2).lstrip(".-_").lower()
    num = re.search(r"(\d+)", rest)
    n = int(num.group(1)) if num else 0
    tag = (2, 0) if not rest else (0, n) if rest.startswith("dev") else (3, n) if rest.startswith("post") else (1, n)
    return (release, tag, rest)


def table_files(systems: Sequence[str] | None = None, frameworks: Sequence[str] | None = None,
                families: Sequence[str] | None = None,
                root: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """One row per parquet file to read: family, system, table, framework, version, path, relpath."""
    base = data_root(root)
    fams = list(families or DEFAULT_FAMILIES)
    bad = [f for f in fams if f not in FAMILIES]
    if bad:
        raise SpecsimError(f"unknown table family {', '.join(bad)} (known: {', '.join(FAMILIES)})")
    fws = None if frameworks is None else {f.lower() for f in frameworks}
    if fws is not None and (unknown := fws - set(FRAMEWORKS)):
        raise SpecsimError(f"unknown framework {', '.join(sorted(unknown))} (known: {', '.join(FRAMEWORKS)})")
    known = available_systems(base)
    wanted = [system_name(s) for s in systems] if systems else known
    missing = [s for s in wanted if s not in known]
    if missing:
        raise SpecsimError(f"no aiconfigurator tables for system(s) {', '.join(missing)} "
                           f"(with tables: {', '.join(known)})")
    rows = []
    for fam in fams:
        for famdir, table in FAMILIES[fam]:
            for system in wanted:
                for path in sorted((base / system / famdir).glob(f"*/*/{table}")):
                    dir_fw, version = path.parts[-3], path.parts[-2]
                    fw = "nccl" if table.startswith("nccl_perf") else dir_fw.lower()
                    if fws is not None and fw not in fws:
                        continue
                    rows.append({"family": fam, "system": system, "table": table.removesuffix(".parquet"),
                                 "framework": fw, "dir_framework": dir_fw, "version": version, "path": str(path),
                                 "relpath": str(path.relative_to(base.parent.parent))})
    return pd.DataFrame(rows, columns=["family", "system", "table", "framework", "dir_framework", "version",
                                       "path", "relpath"])


def framework_tables(system: str, framework: str, root: str | os.PathLike[str] | None = None
                     ) -> dict[str, tuple[str, ...]]:
    """{op-family directory: the versions of `framework` with a table there} on `system` (aiconfigurator name or
    specsim profile name): what NVIDIA measured for that framework on that GPU, before any row is read. Empty
    for a system or framework without tables (a100_pcie, a30, l4 and h100_pcie ship none in 0.12.0)."""
    base = data_root(root) / system_name(system)
    out: dict[str, list[str]] = {}
    for path in sorted(base.glob(f"*/{framework}/*/*.parquet")) if base.is_dir() and framework else []:
        versions = out.setdefault(path.parts[-4], [])
        if path.parts[-2] not in versions:
            versions.append(path.parts[-2])
    return {family: tuple(sorted(v, key=version_key)) for family, v in out.items()}


class FrameMemo:
    """Frames read from the tables, kept per process by what they were read from (`key`: the files, their sizes and
    modification times, and the caller's other inputs): the calibration and the table cost model read the same
    GPU's tables again and again (each test, each framework's fit). Hands out copies; keeps frames of at most
    `max_rows` rows in all, dropping the least recently used."""

    def __init__(self, max_rows: int) -> None:
        self.max_rows = max_rows
        self._frames: OrderedDict[Hashable, pd.DataFrame] = OrderedDict()

    @staticmethod
    def key(files: Sequence[str], *inputs: Hashable) -> Hashable | None:
        """The key of a read of `files` (paths) with `inputs`; None (not kept) when a file cannot be stat()ed."""
        try:
            stats = tuple((f, st.st_size, st.st_mtime_ns) for f in files for st in (os.stat(f),))
        except OSError:
            return None
        return stats, inputs

    def get(self, key: Hashable | None) -> pd.DataFrame | None:
        if key is None or key not in self._frames:
            return None
        self._frames.move_to_end(key)
        return self._frames[key].copy()

    def put(self, key: Hashable | None, frame: pd.DataFrame) -> pd.DataFrame:
        """Keep `frame` (when it fits); returns a copy of it for the caller."""
        if key is not None and len(frame) <= self.max_rows:
            self._frames[key] = frame
            while sum(len(f) for f in self._frames.values()) > self.max_rows:
                self._frames.popitem(last=False)
        return frame.copy()

"""The on-disk cache of the fitted catalogue: keyed by the data file's SHA-256, specsim's version and
the code that fits it, so that a CLI call does not parse and fit 1,000+ entries again."""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

_HERE = Path(__file__).parent


def cache_key(path: str) -> str:
    """The cache file name for the catalogue at ``path`` (its bytes, the version and the fitting code)."""
    from specsim import __version__

    # keyed by the data and by the code that fits it (this package and the chain/tree models it uses), so
    # that an edited fit never serves a stale catalogue
    h = hashlib.sha256(Path(path).read_bytes())
    models = ("chain.py", "trees.py", "sibling_probs.py", "tree_shapes.py")
    for module in (*sorted(_HERE.glob("*.py")), *(_HERE.parent / name for name in models)):
        h.update(module.read_bytes())
    return f"priors-{__version__}-{h.hexdigest()[:16]}.pickle"


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "specsim"


def read_cache(key: str, kind: type[T]) -> T | None:
    """The cached object of type ``kind`` from the user cache, or None (absent, unreadable or from other code)."""
    try:
        with open(_cache_dir() / key, "rb") as fh:
            obj = pickle.load(fh)  # a file this code wrote, keyed by the catalogue's hash and our version
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError):
        return None
    return obj if isinstance(obj, kind) else None


def write_cache(key: str, obj: object) -> None:
    """Best effort: written atomically (a temporary file, then rename); silently skipped if the cache
    directory cannot be written (a read-only home, a sandbox)."""
    try:
        folder = _cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".priors-", dir=folder)
        try:
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(obj, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, folder / key)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        for old in folder.glob("priors-*.pickle"):  # earlier catalogues or code: never read again
            if old.name != key:
                old.unlink(missing_ok=True)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        pass

"""The on-disk cache of the fitted catalogue."""

from __future__ import annotations

import hashlib

from specsim.acceptance.priors.cache import cache_key


def test_the_disk_cache_key_covers_the_data_and_the_fitting_code(tmp_path) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("[]\n")
    b.write_text("[] # edited\n")
    assert cache_key(str(a)) != cache_key(str(b))
    assert cache_key(str(a)) == cache_key(str(a))
    data_only = hashlib.sha256(a.read_bytes()).hexdigest()[:16]
    assert data_only not in cache_key(str(a))  # the fitting code is hashed in too

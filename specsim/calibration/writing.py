"""Writing calibration outputs: every file atomically, a profile only once it loads back."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import yaml

from specsim.cost.hardware import parse_hardware
from specsim.cost.hardware_profile import HardwareProfile
from specsim.errors import SpecsimError


def profile_yaml(hw: HardwareProfile) -> str:
    """The profile as YAML, efficiencies rounded to 6 decimals."""
    data = hw.to_yaml_dict()
    data["efficiency"] = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in data["efficiency"].items()}
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def write_atomic(path: str | Path, text: str | bytes) -> None:
    """Write to a temporary file beside `path`, then rename: nothing is ever half-written."""
    path = Path(path)
    if path.parent and not path.parent.exists():
        raise SpecsimError(f"{path}: folder {path.parent} does not exist")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode() if isinstance(text, str) else text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # an ordinary file's mode, not mkstemp's private 0600
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_profile(hw: HardwareProfile, path: str | Path) -> None:
    """Write the profile YAML atomically, after checking that it loads back as a valid profile."""
    text = profile_yaml(hw)
    parse_hardware(yaml.safe_load(text), str(path))  # what every command will accept
    write_atomic(path, text)

"""Where Sharpen keeps its files.

Everything lives in the platform's standard dirs (platformdirs) unless SHARPEN_HOME is set, which moves
all of them under one folder: the tests use it, and so can a user who wants a portable install.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

HOME_ENV = "SHARPEN_HOME"
APP_NAME = "sharpen"


@dataclass(frozen=True)
class SharpenPaths:
    config_dir: Path
    data_dir: Path
    state_dir: Path
    cache_dir: Path

    @property
    def config_file(self) -> Path:
        return self.config_dir / "config.toml"

    @classmethod
    def under(cls, root: Path) -> SharpenPaths:
        """Every dir in one folder (what SHARPEN_HOME asks for; tests and benchmarks use it too)."""
        return cls(root / "config", root / "data", root / "state", root / "cache")


def sharpen_paths() -> SharpenPaths:
    home = os.environ.get(HOME_ENV)
    if home:
        return SharpenPaths.under(Path(home).expanduser())
    return SharpenPaths(
        config_dir=Path(platformdirs.user_config_dir(APP_NAME)),
        data_dir=Path(platformdirs.user_data_dir(APP_NAME)),
        state_dir=Path(platformdirs.user_state_dir(APP_NAME)),
        cache_dir=Path(platformdirs.user_cache_dir(APP_NAME)),
    )

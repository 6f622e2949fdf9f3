"""Where things live: the repository's conf/ and data/, the default lake, caches."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT: Path = Path(__file__).resolve().parents[2]
CONF_DIR: Path = Path(os.environ.get("LBREPLAY_CONF_DIR", REPO_ROOT / "conf"))
DATA_DIR: Path = REPO_ROOT / "data"
DEFAULT_LAKE: str = os.environ.get("LBREPLAY_LAKE", "data/lake")
CACHE_DIR: Path = Path(os.environ.get("LBREPLAY_CACHE_DIR", Path.home() / ".cache" / "lbreplay"))

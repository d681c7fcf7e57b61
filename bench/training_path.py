"""Imported for its effect: the checkout's root on sys.path, so that a bench can import training/ (which is not
installed with Sharpen, so only the checkout has it). The bench's own folder is on sys.path already."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.append(ROOT)

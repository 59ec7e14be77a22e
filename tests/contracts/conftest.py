"""Makes the shared helper modules of the contract tests importable (no server needed)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

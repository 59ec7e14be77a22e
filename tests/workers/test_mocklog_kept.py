"""The MOCK world and its index kept in the cache folder (`mocklog.index`, `workers.sources.kept`):
read back, they equal the built ones; a damaged or foreign file, or a folder that cannot be
written, costs only the time; a worker's source keeps them where ACI_CACHE_DIR says."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from contracts import QueryLogsRequest, Topic
from workers.sources.kept import cache_dir_from_env, read_kept
from workers.sources.logs.mocklog import index as mock_index
from workers.sources.logs.source import MockLogSource

SCENARIO = "db-pool-exhaustion"


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """No index of this process: each call derives or reads one again."""
    monkeypatch.setattr(mock_index, "_INDEXES", {})


@pytest.fixture(scope="module")
def built() -> mock_index.ScenarioIndex:
    return mock_index._built(mock_index.world_of(SCENARIO))


def _kept_file(folder: Path) -> Path:
    (path,) = folder.glob("mocklog-*.msgpack")
    return path


@pytest.mark.usefixtures("fresh")
def test_the_kept_world_and_index_equal_the_built_ones(
    built: mock_index.ScenarioIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = mock_index.index_of(SCENARIO, str(tmp_path))  # built, and kept
    assert first == built
    payload = read_kept(_kept_file(tmp_path), 1, f"{SCENARIO}\0{mock_index._code_key()}")
    assert msgspec.msgpack.decode(payload)["world"]["scenario"] == SCENARIO
    monkeypatch.setattr(mock_index, "_INDEXES", {})
    monkeypatch.setattr(mock_index, "_built", None)  # a read never builds
    again = mock_index.index_of(SCENARIO, str(tmp_path))
    assert again == built
    for topic in Topic:  # the records are held once, by the world
        assert again.topics[topic].records is again.world.records[topic]


@pytest.mark.usefixtures("fresh")
def test_a_damaged_or_foreign_file_is_built_again(
    built: mock_index.ScenarioIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mock_index.index_of(SCENARIO, str(tmp_path))
    path = _kept_file(tmp_path)
    pristine = path.read_bytes()
    middle = len(pristine) // 2
    damaged = [
        pristine[:middle] + bytes([pristine[middle] ^ 0xFF]) + pristine[middle + 1 :],
        pristine[: len(pristine) // 3],
        b"\x93\x01\x02\x03 not a kept file",
    ]
    for data in damaged:
        path.write_bytes(data)
        monkeypatch.setattr(mock_index, "_INDEXES", {})
        assert mock_index.index_of(SCENARIO, str(tmp_path)) == built
        assert path.read_bytes() == pristine  # kept again
    # Code that changed (another key) never reads the old file: it keeps its own.
    monkeypatch.setattr(mock_index, "_code_key", lambda: "other-code")
    monkeypatch.setattr(mock_index, "_INDEXES", {})
    assert mock_index.index_of(SCENARIO, str(tmp_path)) == built
    assert len(list(tmp_path.glob("mocklog-*.msgpack"))) == 2


@pytest.mark.usefixtures("fresh")
def test_a_folder_that_cannot_be_written_costs_only_the_time(
    built: mock_index.ScenarioIndex, tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    assert mock_index.index_of(SCENARIO, str(tmp_path / "a-file" / "cache")) == built
    assert mock_index.index_of("slow-query-storm") is not None  # no folder: built, not kept


@pytest.mark.usefixtures("fresh")
async def test_the_source_keeps_its_world_where_aci_cache_dir_says(tmp_path: Path) -> None:
    env = {"ACI_CACHE_DIR": str(tmp_path / "cache")}
    assert cache_dir_from_env(env) == tmp_path / "cache"
    assert cache_dir_from_env({"XDG_CACHE_HOME": "/x"}) == Path("/x/aci-evidence")
    source = MockLogSource.from_env(env)
    answer = await source.fetch(QueryLogsRequest(topic=Topic.APPLICATION, query="timeout"))
    assert answer.match_count > 0
    assert _kept_file(tmp_path / "cache").stat().st_size > 1_000_000

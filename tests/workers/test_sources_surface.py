"""The sources' room: each package exports its surface, and the old flat modules are gone."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = [
    "workers.sources",
    "workers.sources.knowledge",
    "workers.sources.logs",
    "workers.sources.logs.mocklog",
    "workers.sources.mysql",
    "workers.sources.mysql.shop",
]
GONE = [
    "workers.source",
    "workers.knowledge",
    "workers.rag_http",
    "workers.content_encoding",
    "workers.logs",
    "workers.mocklog",
    "workers.mysql",
    "workers.sqlguard",
    "workers.shop",
    "workers.instant",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_every_exported_name_exists(name: str) -> None:
    package = importlib.import_module(name)
    assert package.__all__, name
    for exported in package.__all__:
        assert hasattr(package, exported), f"{name}.{exported}"


def test_the_surface_of_sources() -> None:
    import workers.sources as sources

    assert set(sources.__all__) >= {
        "ImmediateSource",
        "Source",
        "SourceError",
        "open_sources",
        "warm_up",
        "wrap_sources",
    }


@pytest.mark.parametrize("name", GONE)
def test_no_module_left_at_an_old_path(name: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(name)

"""The package `__all__` is exactly the public surface of contracts/."""

from __future__ import annotations

import importlib
import inspect

import msgspec
import pytest

import contracts

SUBMODULES = [
    "bounds", "fingerprint", "invocation", "logs", "mysql", "projection", "rag", "requests", "results",
    "status", "text", "tools", "views", "window",
]  # fmt: skip
# Submodule names that are deliberately not re-exported from the package: helpers and
# settings that only sibling modules or tests use. Anything else public must be exported.
NOT_REEXPORTED = {
    "DEFAULT_LOOKBACK_MINUTES", "normalise_sql", "level_rank", "mask_template", "find_hits",
    "pattern_priority", "pattern_key",
    "UPSTREAM_TYPES", "LOOKBACK_MAX_MINUTES", "TOOL_REQUESTS", "ERROR_MESSAGE_CHARS",
    "JsonScalar", "DESCRIPTIONS", "MCP_ANNOTATIONS", "ToolFormat", "cut",
}  # fmt: skip


def test_every_name_in_all_exists_and_is_unique() -> None:
    assert len(set(contracts.__all__)) == len(contracts.__all__)
    assert contracts.__all__ == sorted(contracts.__all__, key=lambda n: (not n.isupper(), n))
    for name in contracts.__all__:
        assert hasattr(contracts, name), name


@pytest.mark.parametrize("module_name", SUBMODULES)
def test_submodule_all_is_defined_and_exported(module_name: str) -> None:
    module = importlib.import_module(f"contracts.{module_name}")
    for name in module.__all__:
        assert hasattr(module, name), f"{module_name}.{name}"
        if name not in NOT_REEXPORTED:
            assert name in contracts.__all__, f"{module_name}.{name} is public but not exported"
            assert getattr(contracts, name) is getattr(module, name)


@pytest.mark.parametrize("module_name", SUBMODULES)
def test_every_public_struct_and_function_is_in_the_submodule_all(module_name: str) -> None:
    module = importlib.import_module(f"contracts.{module_name}")
    for name, value in vars(module).items():
        if name.startswith("_") or getattr(value, "__module__", None) != module.__name__:
            continue
        is_struct = inspect.isclass(value) and issubclass(value, msgspec.Struct)
        if is_struct or inspect.isfunction(value) or inspect.isclass(value):
            assert name in module.__all__, f"{module_name}.{name} missing from __all__"


def test_public_names_have_docstrings() -> None:
    for name in contracts.__all__:
        value = getattr(contracts, name)
        if inspect.isfunction(value) or (
            inspect.isclass(value) and value.__module__.startswith("contracts")
        ):
            assert inspect.getdoc(value), name

"""Where the `query_mysql` data sources live: operator configuration read without connecting.

`ACI_MYSQL_<NAME>_URL` variables and an optional `ACI_MYSQL_CONFIG` file (TOML or JSON, a
`[mysql]` table of name = URL, or of name = `{url = "...", diagnostics = true}`) name each
logical data source; `parse_url` turns a URL into `ConnectParams` without ever echoing it (it
holds a password). `diagnostic_names` says which data sources the operator opened to the
server diagnostic views (`ACI_MYSQL_<NAME>_DIAGNOSTICS=true` or `diagnostics = true`; off by
default).
"""

from __future__ import annotations

import json
import os
import re
import time
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Final
from urllib.parse import unquote, urlsplit

import msgspec

from pipeline.settings import SettingsError
from workers.sources.base import failure_of

__all__ = [
    "ENV_URL",
    "ConfigFile",
    "ConnectParams",
    "data_source_names",
    "diagnostic_names",
    "listed_names",
    "parse_url",
    "read_config_file",
]

ENV_URL: Final = re.compile(r"^ACI_MYSQL_([A-Z][A-Z0-9_]*)_URL$")
ENV_DIAGNOSTICS: Final = re.compile(r"^ACI_MYSQL_([A-Z][A-Z0-9_]*)_DIAGNOSTICS$")
_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"", "0", "false", "no", "off"})
_REQUEST_NAME: Final = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")  # QueryMysqlRequest.data_source


class ConnectParams(msgspec.Struct, frozen=True, kw_only=True):
    """Where one data source lives (operator configuration; never shown to the agent)."""

    host: str
    port: int = 3306
    user: str
    password: str = ""
    database: str = ""


def parse_url(url: str) -> ConnectParams:
    """Parse `mysql://user:pass@host:port/db`; raises ValueError without echoing the URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("mysql", "mariadb") or not parts.hostname or not parts.username:
        raise ValueError("a MySQL URL must look like mysql://user:pass@host:port/db")
    return ConnectParams(
        host=parts.hostname,
        port=parts.port or 3306,
        user=unquote(parts.username),
        password=unquote(parts.password or ""),
        database=unquote(parts.path.lstrip("/")),
    )


def _config_table(path: str) -> dict[str, object]:
    """The file's table of data sources; a `ValueError` naming the variable and why (never the
    path, nor a byte of the file: it may hold passwords) when it cannot be read or parsed."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("ACI_MYSQL_CONFIG: the file is not UTF-8") from None
    except OSError as exc:
        # A host (an MCP client) starts its server in a folder of its own choosing.
        where = "" if os.path.isabs(path) else (
            f"; a relative path is read from the working folder {os.getcwd()}"
        )  # fmt: skip
        raise ValueError(
            f"ACI_MYSQL_CONFIG: the file cannot be read ({failure_of(exc)}{where})"
        ) from None
    toml = path.endswith(".toml")
    try:
        data = tomllib.loads(text) if toml else json.loads(text)
    except ValueError as exc:  # its position only: the text may hold passwords
        kind = "TOML" if toml else "JSON (a file named *.toml is read as TOML)"
        where = f"line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise ValueError(f"ACI_MYSQL_CONFIG: not valid {kind}: {where}") from None
    table = data.get("mysql", data) if isinstance(data, dict) else {}
    return {str(k).lower(): v for k, v in table.items()} if isinstance(table, dict) else {}


def _settings_table(path: str) -> dict[str, object]:
    # The table for a host's or the CLI's settings: a `SettingsError` (one line, exit 2).
    try:
        return _config_table(path)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None


def read_config_file(path: str) -> dict[str, str]:
    """The `name -> URL` table of an ACI_MYSQL_CONFIG file (names lowercased): `name = URL`
    or `name = {url = URL, ...}`."""
    return _urls(_config_table(path))


def _urls(table: dict[str, object]) -> dict[str, str]:
    urls: dict[str, str] = {}
    for name, value in table.items():
        if isinstance(value, dict):
            value = value.get("url")
        if isinstance(value, str):
            urls[name] = value
    return urls


def diagnostic_names(env: Mapping[str, str]) -> frozenset[str]:
    """The data sources whose operator opened the server diagnostic views (docs/mysql.md
    "Diagnostic views"): `diagnostics = true` in a data source's table of ACI_MYSQL_CONFIG, or
    `ACI_MYSQL_<NAME>_DIAGNOSTICS=true` (which wins). Off unless said; a value that is not a
    yes or a no is a `SettingsError` naming it (never guessed open)."""
    chosen: dict[str, bool] = {}
    if env.get("ACI_MYSQL_CONFIG"):
        table = _settings_table(env["ACI_MYSQL_CONFIG"])
        for name, value in table.items():
            flag = value.get("diagnostics", False) if isinstance(value, dict) else False
            if not isinstance(flag, bool):
                raise SettingsError(
                    f"ACI_MYSQL_CONFIG: data source {name[:64]}: diagnostics must be true or false"
                )
            chosen[name] = flag
    for key, value in env.items():
        if m := ENV_DIAGNOSTICS.match(key):
            word = value.strip().lower()
            if word not in _TRUE | _FALSE:
                raise SettingsError(f"{key}: must be true or false")
            chosen[m.group(1).lower()] = word in _TRUE
    return frozenset(name for name, flag in chosen.items() if flag)


def listed_names(env: Mapping[str, str]) -> tuple[str, ...]:
    """`ACI_MYSQL_SOURCES` (`shop,pkgs`): data source names given without their URLs, so an
    agent host lists them in `query_mysql`'s schema without holding database credentials. A
    name no request could carry is a `SettingsError` naming it."""
    names = tuple(n.strip().lower() for n in env.get("ACI_MYSQL_SOURCES", "").split(","))
    names = tuple(n for n in names if n)
    bad = [n for n in names if not _REQUEST_NAME.fullmatch(n)]
    if bad:
        raise SettingsError(
            f"ACI_MYSQL_SOURCES: {bad[0][:64]!r} is not a data source name "
            "(a letter, then up to 63 letters, digits or '_'; names separated by commas)"
        )
    return names


def data_source_names(env: Mapping[str, str]) -> tuple[str, ...]:
    """The configured logical data source names (as `MysqlSource.from_env` reads them, without
    connecting, and those `ACI_MYSQL_SOURCES` names without credentials): what a host lists in
    `query_mysql`'s schema. A name no request could carry (see
    `QueryMysqlRequest.data_source`) is left out: no call could name it. An unreadable
    ACI_MYSQL_CONFIG is a `SettingsError` naming the variable and why (not the path)."""
    names: set[str] = set(listed_names(env))
    if env.get("ACI_MYSQL_CONFIG"):
        names.update(_urls(_settings_table(env["ACI_MYSQL_CONFIG"])))
    names.update(m.group(1).lower() for key in env if (m := ENV_URL.match(key)))
    return tuple(sorted(n for n in names if _REQUEST_NAME.fullmatch(n)))


_RACY_S: Final = 2.0  # a file written this recently may change again within its mtime's tick


class ConfigFile:
    """The `ACI_MYSQL_CONFIG` file of a running worker, read again when it changes (a password
    rotated: the operator writes the new URL and the next call uses it, no restart). Each look
    is one stat(2); the bytes are read again only when the stat changed or the file was
    written in the last 2 s (two writes within the file system's timestamp tick, of the same
    size, leave the same stat: git's "racy" files). `changed` is the new `name -> URL` table
    once per change of its bytes, or None. A file that cannot be read or parsed meanwhile
    (written half-way) raises `ValueError` or `OSError` once per change; the URLs read before
    stand."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._stamp = self._stat()
        self._bytes = self._read()

    def _stat(self) -> tuple[int, int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino

    def _read(self) -> bytes | None:
        try:
            return Path(self.path).read_bytes()
        except OSError:
            return None

    def changed(self) -> dict[str, str] | None:
        stamp = self._stat()
        racy = stamp is not None and time.time_ns() - stamp[1] < _RACY_S * 1e9
        if stamp == self._stamp and not racy:
            return None
        self._stamp = stamp
        data = self._read()
        if data == self._bytes:
            return None
        self._bytes = data
        return read_config_file(self.path)

"""Operator settings of the pipeline, read once from the environment into one frozen struct."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

import msgspec

from contracts.bounds import Bounds
from contracts.fingerprint import DEFAULT_LOOKBACK_MINUTES
from pipeline.keys import MAX_PARTITIONS, Keys

__all__ = ["Settings", "SettingsError"]


class SettingsError(ValueError):
    """An operator setting is missing or out of range (the message names the variable)."""


def _flag(text: str) -> bool:
    if text not in ("0", "1"):
        raise ValueError(text)
    return text == "1"


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """Pipeline settings. Env: `ACI_REDIS_URL`, `ACI_PREFIX`, `ACI_VISIBILITY_TIMEOUT_S`,
    `ACI_MAX_ATTEMPTS`, `ACI_DEADLINE_S`, `ACI_RETENTION_S`, `ACI_STREAM_MAXLEN`,
    `ACI_RAW_MAX_BYTES`, `ACI_OBSERVATION_MAX_BYTES`, `ACI_LOGS_DEFAULT_LOOKBACK`,
    `ACI_ARGUMENT_MAX_BYTES` (a submitted call's arguments; larger ones are refused unstored),
    `ACI_PARTITIONS` (1 to 256 partitions of the queue; every process of a deployment must use
    the same count), `ACI_REDIS_CLUSTER` (1: the URL names a Redis Cluster node; a
    `redis+cluster://` URL says the same), `ACI_WAIT_REPLICAS` (WAIT for this many replicas
    after each submit and finish; 0 = do not wait), `ACI_WAIT_TIMEOUT_MS` and `ACI_ADMIT_HERE`
    (auto, 1 or 0: whether a client trusted as a worker admits its own calls)."""

    redis_url: str | None = None
    prefix: str = "aci"
    visibility_timeout_s: float = 30.0
    max_attempts: int = 3
    deadline_s: float = 10.0
    retention_s: int = 86_400
    stream_maxlen: int = 100_000
    raw_max_bytes: int = 262_144
    argument_max_bytes: int = 65_536
    read_batch: int = 128
    default_lookback: int = DEFAULT_LOOKBACK_MINUTES
    bounds: Bounds = Bounds()
    partitions: int = 1
    redis_cluster: bool = False
    wait_replicas: int = 0
    wait_timeout_ms: int = 1000
    # A request whose call record has not appeared after this long is sent again (a submitter
    # can drop requests not admitted yet; `pipeline.submitter`). Env: ACI_ADMIT_RESEND_S.
    admit_resend_s: float = 3.0
    # The share of a worker's slots one session may hold while others wait
    # (`workers.runtime.share`). Env: ACI_SESSION_SHARE.
    session_share: float = 0.25
    # Whether a client admits its own calls in its submit's round trip (`pipeline.admit_here`):
    # 'auto' as Redis's default user (all rights unless the operator restricted it), '1' as any
    # user that may run the admission script, '0' never. Env: ACI_ADMIT_HERE.
    admit_here: str = "auto"

    def __post_init__(self) -> None:
        # A zero or negative value is never meant: a deadline every call misses, views trimmed
        # or records expired as soon as they are written.
        if not self.deadline_s > 0:
            raise SettingsError("ACI_DEADLINE_S must be > 0")
        if self.retention_s < 1:
            raise SettingsError("ACI_RETENTION_S must be >= 1")
        if self.stream_maxlen < 1:
            raise SettingsError("ACI_STREAM_MAXLEN must be >= 1")
        if self.raw_max_bytes < 0:
            raise SettingsError("ACI_RAW_MAX_BYTES must be >= 0")
        if self.visibility_timeout_s <= self.deadline_s:
            raise SettingsError(
                "ACI_VISIBILITY_TIMEOUT_S must exceed ACI_DEADLINE_S, or live work is taken over"
            )
        if self.argument_max_bytes < 1024:
            raise SettingsError("ACI_ARGUMENT_MAX_BYTES must be >= 1024")
        if self.max_attempts < 1:
            raise SettingsError("ACI_MAX_ATTEMPTS must be >= 1")
        if not 1 <= self.partitions <= MAX_PARTITIONS:
            raise SettingsError(f"ACI_PARTITIONS must be 1 to {MAX_PARTITIONS}")
        if not 0 < self.session_share <= 1:
            raise SettingsError("ACI_SESSION_SHARE must be > 0 and <= 1")
        if self.admit_here not in ("auto", "0", "1"):
            raise SettingsError("ACI_ADMIT_HERE must be auto, 0 or 1")
        if self.admit_resend_s <= 0:
            raise SettingsError("ACI_ADMIT_RESEND_S must be > 0")
        if self.wait_replicas < 0 or self.wait_timeout_ms < 1:
            raise SettingsError("ACI_WAIT_REPLICAS must be >= 0 and ACI_WAIT_TIMEOUT_MS >= 1")
        if not self.prefix or any(c in self.prefix for c in "{}: "):
            raise SettingsError("ACI_PREFIX must be non-empty without braces, colons or spaces")

    def keys(self) -> Keys:
        """The key names of this deployment (prefix and partitions)."""
        return Keys(self.prefix, self.partitions)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Settings from `env` (default: the process environment), then `overrides`."""
        env = os.environ if env is None else env
        values: dict[str, object] = {}
        table: dict[str, tuple[str, Callable[[str], object]]] = {
            "ACI_REDIS_URL": ("redis_url", str),
            "ACI_PREFIX": ("prefix", str),
            "ACI_VISIBILITY_TIMEOUT_S": ("visibility_timeout_s", float),
            "ACI_MAX_ATTEMPTS": ("max_attempts", int),
            "ACI_DEADLINE_S": ("deadline_s", float),
            "ACI_RETENTION_S": ("retention_s", int),
            "ACI_STREAM_MAXLEN": ("stream_maxlen", int),
            "ACI_RAW_MAX_BYTES": ("raw_max_bytes", int),
            "ACI_LOGS_DEFAULT_LOOKBACK": ("default_lookback", int),
            "ACI_ARGUMENT_MAX_BYTES": ("argument_max_bytes", int),
            "ACI_PARTITIONS": ("partitions", int),
            "ACI_REDIS_CLUSTER": ("redis_cluster", _flag),
            "ACI_WAIT_REPLICAS": ("wait_replicas", int),
            "ACI_WAIT_TIMEOUT_MS": ("wait_timeout_ms", int),
            "ACI_ADMIT_RESEND_S": ("admit_resend_s", float),
            "ACI_SESSION_SHARE": ("session_share", float),
            "ACI_ADMIT_HERE": ("admit_here", str),
        }
        for var, (field, kind) in table.items():
            text = env.get(var, "").strip()
            if text:
                try:
                    values[field] = kind(text)
                except ValueError:
                    name = {_flag: "0 or 1", int: "an int"}.get(kind, "a number")
                    raise SettingsError(f"{var} must be {name}") from None
        budget = env.get("ACI_OBSERVATION_MAX_BYTES", "").strip()
        if budget:
            try:
                values["bounds"] = Bounds(observation_max_bytes=int(budget))
            except ValueError:
                raise SettingsError("ACI_OBSERVATION_MAX_BYTES must be an int >= 1024") from None
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]

"""The invocation envelope carried on the invocations stream (versioned, msgspec JSON)."""

from __future__ import annotations

import hashlib
from typing import Final

import msgspec
from msgspec import UNSET, UnsetType

from contracts import ErrorResult, Request, decode_invocation
from contracts.status import CONTRACT_VERSION
from pipeline.keys import is_valid_session_id

__all__ = [
    "EnvelopeError",
    "Invocation",
    "decode_envelope",
    "encode_envelope",
    "peek_identity",
    "scope_key",
    "scope_key_of",
]


class Invocation(msgspec.Struct, frozen=True, kw_only=True):
    """One framework tool call submitted for a session.

    `arguments` is kept as the JSON text the framework supplied (an object supplied
    already-decoded is encoded once), so the worker sees exactly what the model produced.
    """

    v: int = CONTRACT_VERSION
    session_id: str
    tool: str
    tool_call_id: str
    arguments: str
    submitted_at_ms: int
    traceparent: str | UnsetType = UNSET
    # Incident time (epoch ms) a harness pinned the call to: a `query_logs` window then ends
    # here instead of at admission. Part of the call's scope (its scope key and fingerprint).
    as_of_ms: int | UnsetType = UNSET
    # The end of the call's log window (epoch ms), written by admission only (the trusted
    # side; a submitter's value is replaced): `as_of_ms` or admission's clock. The worker and
    # a replay's re-execute read this window, never a new one (`pipeline.window`).
    window_end_ms: int | UnsetType = UNSET
    # True on a cancel request (`pipeline.cancel`): the same call, asked to stop. A worker
    # built before it admits such a request as the call itself (unknown fields are ignored).
    cancel: bool | UnsetType = UNSET


class EnvelopeError(Exception):
    """A stream entry that is not an invocation of this contract version (not retryable)."""


_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = msgspec.json.Decoder(Invocation)
# What a hostile envelope can make the decoder raise: a request only a few KB long but nested
# deeper than the decoder recurses (in a field it skips) raises RecursionError.
_UNDECODABLE: Final = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


def encode_envelope(invocation: Invocation) -> bytes:
    return _ENCODER.encode(invocation)


def decode_envelope(data: bytes | str) -> Invocation:
    """Decode an envelope; a foreign version or shape raises `EnvelopeError`."""
    try:
        invocation = _DECODER.decode(data)
    except _UNDECODABLE as exc:
        raise EnvelopeError(f"not an invocation envelope: {exc}") from exc
    if invocation.v != CONTRACT_VERSION:
        raise EnvelopeError(
            f"envelope has contract version {invocation.v}, this build speaks {CONTRACT_VERSION}"
        )
    if not is_valid_session_id(invocation.session_id):
        raise EnvelopeError("envelope has an invalid session id")
    return invocation


class _Identity(msgspec.Struct):
    v: int = 0
    session_id: str = ""
    tool: str = ""
    tool_call_id: str = ""


_IDENTITY_DECODER: Final = msgspec.json.Decoder(_Identity)


def peek_identity(data: bytes | str) -> Invocation | None:
    """Who an envelope that failed to decode belongs to (session, tool, id, version), when
    that much can be read, so its invocation can still be finished as ERROR."""
    try:
        found = _IDENTITY_DECODER.decode(data)
    except _UNDECODABLE:
        return None
    if not found.session_id or not found.tool_call_id:
        return None
    return Invocation(
        v=found.v,
        session_id=found.session_id,
        tool=found.tool,
        tool_call_id=found.tool_call_id,
        arguments="null",
        submitted_at_ms=0,
    )


def scope_key(
    tool: str, tool_call_id: object, arguments: object, as_of_ms: int | UnsetType = UNSET
) -> str:
    """What names one call's scope for idempotency: a repeated submit of a (session, id) is the
    same call only with the same key, and a worker finishes a call only with the key the submit
    recorded. The exact decoded request (so JSON spacing and key order do not matter, but every
    value does: a fingerprint folds case, which a search may not), or, for arguments that do
    not decode, the tool and the arguments' text. A pinned incident time (`as_of_ms`) is part
    of the scope; without one the key is what it always was."""
    decoded = decode_invocation(tool, tool_call_id, arguments)
    return scope_key_of(tool, decoded, arguments, as_of_ms)


def scope_key_of(
    tool: str,
    decoded: Request | ErrorResult,
    arguments: object,
    as_of_ms: int | UnsetType = UNSET,
) -> str:
    """`scope_key` of a call already decoded (its request, or the ERROR of arguments that do
    not decode), so a caller that decoded it once does not decode it again."""
    if isinstance(decoded, ErrorResult):
        text = arguments if isinstance(arguments, str) else _ENCODER.encode(arguments).decode()
        digest = hashlib.sha256(f"u\0{tool}\0{text}".encode("utf-8", "surrogatepass"))
    else:
        digest = hashlib.sha256(f"r\0{tool}\0".encode() + _ENCODER.encode(decoded))
    if isinstance(as_of_ms, int):
        digest.update(f"\0as_of\0{as_of_ms}".encode())
    return digest.hexdigest()[:32]

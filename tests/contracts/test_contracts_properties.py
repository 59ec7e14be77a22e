"""Hypothesis properties: bounds never exceeded, `truncated` exactly when something was cut,
the observation field set, tool call ids byte-identical, fingerprints invariant."""

from __future__ import annotations

import json
import string
from typing import Any

import msgspec
from contract_samples import logs_upstream
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_contracts_views import assert_observation_field_set

from contracts import (
    Bounds,
    ErrorResult,
    LogRecord,
    LogsResult,
    LogsUpstream,
    LookupKnowledgeRequest,
    MysqlResult,
    MysqlUpstream,
    RagResult,
    Request,
    decode_invocation,
    encode_result,
    encode_view,
    fingerprint_scope,
    normalise_scope,
    observe,
    project_logs,
    project_mysql,
    project_rag,
    to_json_cell,
)
from contracts.views import _first_view

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

small_bounds = st.builds(
    Bounds,
    rag_max_evidence=st.integers(1, 4),
    rag_excerpt_chars=st.integers(1, 60),
    rag_field_chars=st.integers(1, 12),
    logs_max_patterns=st.integers(1, 4),
    logs_max_events=st.integers(1, 5),
    logs_message_chars=st.integers(1, 40),
    logs_template_chars=st.integers(1, 40),
    logs_field_chars=st.integers(1, 30),
    mysql_max_rows=st.integers(1, 5),
    mysql_max_columns=st.integers(1, 4),
    mysql_cell_chars=st.integers(1, 30),
    mysql_max_bytes=st.integers(2, 400),
    observation_max_bytes=st.integers(1024, 2048),
)
text = st.text(max_size=80)
word = st.text(alphabet=string.ascii_letters + " é中\x00\n", max_size=30)


# --- RAG -----------------------------------------------------------------------------------


@st.composite
def rag_upstreams(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """An upstream with noise, and the distinct usable hits in it (unique document ids)."""
    hits: list[Any] = []
    usable: list[dict[str, str]] = []
    for i in range(draw(st.integers(0, 7))):
        hit = {
            "id": f"doc-{i}" + draw(st.text(alphabet="xyz", max_size=12)),
            "title": draw(word), "source": draw(word), "breadcrumb": draw(word),
            "content": draw(text), "score": draw(st.floats()), "rerankScore": 0.5,
            "metadata": {"chunk": i}, "fullBody": draw(text),
        }  # fmt: skip
        hits.append(hit)
        if hit["content"].strip():
            usable.append(hit)
        if draw(st.booleans()):
            hits.append(dict(hit))  # an exact repeat is not new evidence
    hits.extend(draw(st.lists(st.none() | st.integers() | st.just({"content": ""}), max_size=2)))
    relevance = draw(st.sampled_from(["high", "HIGH", "Medium", "low", "bogus", 3, None]))
    key = draw(st.sampled_from(["relevanceLevel", "relevance_level"]))
    upstream = {"contextPack": {key: relevance, "hits": hits}, "retrievalTrace": {"l0": [1]}}
    return upstream, usable


@FAST
@given(rag_upstreams(), small_bounds, st.text(min_size=1, max_size=300).filter(str.strip))
def test_rag_bounds_and_truncated_exactly_when_cut(
    drawn: tuple[dict[str, Any], list[dict[str, str]]], bounds: Bounds, query: str
) -> None:
    upstream, usable = drawn
    result = project_rag(LookupKnowledgeRequest(query=query), "call_1", upstream, bounds)
    assert isinstance(result, RagResult)
    assert len(result.evidence) <= bounds.rag_max_evidence
    assert result.returned_count == len(result.evidence)
    for e in result.evidence:
        assert len(e.excerpt) <= bounds.rag_excerpt_chars
        assert max(len(e.document_id), len(e.title), len(e.source), len(e.breadcrumb)) <= (
            bounds.rag_field_chars
        )
    # Lossless iff every usable hit appears whole (every field uncut).
    shown = {(e.document_id, e.source, e.title, e.breadcrumb, e.excerpt) for e in result.evidence}
    lossless = all(
        tuple(h[k].strip() for k in ("id", "source", "title", "breadcrumb", "content")) in shown
        for h in usable
    )
    assert result.truncated == (not lossless)
    assert (result.evidence_status == "EVIDENCE_FOUND") == bool(usable)
    for e in result.evidence:  # verbatim slices
        assert any(e.excerpt in h["content"] for h in usable)
    _check_observation(result, bounds)


# --- Logs ----------------------------------------------------------------------------------


@st.composite
def logs_upstreams(draw: st.DrawFn) -> LogsUpstream:
    records = [
        LogRecord(
            timestamp=f"2024-05-01T09:{draw(st.integers(0, 59)):02d}:00+00:00",
            level=draw(st.sampled_from(["ERROR", "WARN", "INFO", "debug", "x" * 40])),
            service=draw(st.sampled_from(["api", "svc-" + "s" * 30])),
            message=draw(st.sampled_from(["timeout", "pool exhausted", "retry"])) + draw(word),
            fields=draw(
                st.dictionaries(
                    st.sampled_from("abc"), st.none() | st.integers() | word, max_size=2
                )
            ),
        )
        for _ in range(draw(st.integers(0, 8)))
    ]
    match_count = len(records) + draw(st.integers(0, 3))
    return LogsUpstream(
        source_kind="MOCK", scope=logs_upstream().scope, match_count=match_count, records=records
    )


def _logs_lossless(upstream: LogsUpstream, result: LogsResult, bounds: Bounds) -> bool:
    if (
        upstream.match_count > len(upstream.records)
        or len(upstream.records) > bounds.logs_max_events
    ):
        return False
    if len(result.patterns) < len({p.template for p in result.patterns}) or any(
        len(p.template) > bounds.logs_template_chars for p in result.patterns
    ):
        return False  # pragma: no cover
    derived = {r.message for r in upstream.records}
    del derived
    templates = {p.template for p in result.patterns}
    from contracts.logs import mask_template

    all_templates = {mask_template(r.message) for r in upstream.records}
    if len(all_templates) > bounds.logs_max_patterns or any(
        len(t) > bounds.logs_template_chars for t in all_templates
    ):
        return False
    assert templates == all_templates
    strings = [
        s for r in upstream.records
        for s in (r.timestamp, r.level, r.service, *[v for v in r.fields.values() if isinstance(v, str)])
    ]  # fmt: skip
    return all(len(s) <= bounds.logs_field_chars for s in strings) and all(
        len(r.message) <= bounds.logs_message_chars for r in upstream.records
    )


@FAST
@given(logs_upstreams(), small_bounds)
def test_logs_bounds_and_truncated_exactly_when_cut(upstream: LogsUpstream, bounds: Bounds) -> None:
    result = project_logs("call_1", upstream, bounds)
    assert len(result.patterns) <= bounds.logs_max_patterns
    assert len(result.events) <= bounds.logs_max_events
    assert result.returned_count == len(result.events) <= result.match_count
    for p in result.patterns:
        assert len(p.template) <= bounds.logs_template_chars
        assert max(len(p.level), len(p.first_seen), len(p.last_seen)) <= bounds.logs_field_chars
    for e in result.events:
        assert len(e.message) <= bounds.logs_message_chars
        assert max(len(e.timestamp), len(e.level), len(e.service)) <= bounds.logs_field_chars
        assert all(
            len(v) <= bounds.logs_field_chars for v in e.fields.values() if isinstance(v, str)
        )
    assert result.truncated == (not _logs_lossless(upstream, result, bounds))
    _check_observation(result, bounds)


# --- MySQL ---------------------------------------------------------------------------------

cells = st.none() | st.booleans() | st.integers() | st.floats() | word | st.binary(max_size=20) | st.decimals(
    places=2, allow_nan=False
) | st.datetimes() | st.timedeltas() | st.lists(st.integers(), max_size=3) | st.dictionaries(
    st.sampled_from("ab"), word, max_size=2
)  # fmt: skip


@st.composite
def mysql_upstreams(draw: st.DrawFn) -> MysqlUpstream:
    columns = draw(st.lists(word, min_size=1, max_size=5))
    rows = draw(st.lists(st.lists(cells, min_size=len(columns), max_size=len(columns)), max_size=6))
    return MysqlUpstream(columns=columns, rows=rows, stopped_early=draw(st.booleans()))


@FAST
@given(mysql_upstreams(), small_bounds)
def test_mysql_bounds_and_truncated_exactly_when_cut(
    upstream: MysqlUpstream, bounds: Bounds
) -> None:
    result = project_mysql("call_1", upstream, bounds)
    assert len(result.columns) <= bounds.mysql_max_columns
    assert len(result.rows) <= bounds.mysql_max_rows and result.returned_count == len(result.rows)
    assert len(msgspec.json.encode(result.rows)) <= bounds.mysql_max_bytes
    for row in result.rows:
        assert len(row) == len(result.columns)
        for cell in row:
            if isinstance(cell, str):
                assert len(cell) <= bounds.mysql_cell_chars
            elif isinstance(cell, list | dict):
                assert len(msgspec.json.encode(cell).decode()) <= bounds.mysql_cell_chars
    expected = [[to_json_cell(c) for c in row] for row in upstream.rows]
    lossless = (
        not upstream.stopped_early
        and result.columns == upstream.columns
        and msgspec.json.encode(result.rows) == msgspec.json.encode(expected)
    )
    assert result.truncated == (not lossless)
    _check_observation(result, bounds)


# --- Views ---------------------------------------------------------------------------------


def _check_observation(result: RagResult | LogsResult | MysqlResult, bounds: Bounds) -> None:
    observation = observe(result, bounds)
    data = encode_view(observation)
    assert len(data) <= bounds.observation_max_bytes
    assert_observation_field_set(type(result).__name__, data)
    whole = encode_view(_first_view(result))
    cut = len(whole) > bounds.observation_max_bytes
    assert observation.truncated == (result.truncated or cut)  # type: ignore[union-attr]
    assert (data == whole) == (not cut)
    assert data == encode_view(observe(result, bounds))  # deterministic


# --- Tool call ids -------------------------------------------------------------------------

valid_ids = st.text(alphabet=[chr(c) for c in range(0x21, 0x7F)], min_size=1, max_size=256)
invalid_ids = (
    st.text(max_size=300).filter(
        lambda s: not (1 <= len(s) <= 256 and all(0x21 <= ord(c) <= 0x7E for c in s))
    )
    | st.none() | st.integers() | st.binary()
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(valid_ids, st.sampled_from(['{"query": "x"}', '{"query": 1}', "{", '{"q": 1}']))
def test_valid_tool_call_id_is_byte_identical(tool_call_id: str, arguments: str) -> None:
    decoded = decode_invocation("lookup_knowledge", tool_call_id, arguments)
    if isinstance(decoded, ErrorResult):
        data = encode_result(decoded)
        assert json.loads(data)["tool_call_id"].encode() == tool_call_id.encode()
        assert encode_view(observe(decoded, Bounds())).count(b'"tool_call_id"') == 1
        return
    result = project_rag(decoded, tool_call_id, {"hits": [{"content": "c"}]}, Bounds())
    for data in (encode_result(result), encode_view(observe(result, Bounds()))):
        assert json.loads(data)["tool_call_id"].encode() == tool_call_id.encode()


@settings(max_examples=150, deadline=None)
@given(invalid_ids)
def test_invalid_tool_call_id_never_appears(tool_call_id: object) -> None:
    result = decode_invocation("lookup_knowledge", tool_call_id, '{"query": "x"}')
    assert isinstance(result, ErrorResult) and result.error.code == "INVALID_TOOL_CALL_ID"
    for data in (encode_result(result), encode_view(observe(result, Bounds()))):
        assert "tool_call_id" not in json.loads(data)


# --- Fingerprints --------------------------------------------------------------------------

spaces = st.text(alphabet=" \t\n", min_size=1, max_size=3)


def _fp(tool: str, arguments: object) -> str:
    request = decode_invocation(tool, "call_1", arguments)
    assert not isinstance(request, ErrorResult), request
    typed: Request = request
    return fingerprint_scope(normalise_scope(tool, typed))


def _respace(words: list[str], draw: st.DrawFn) -> str:
    return draw(spaces) + "".join(w + draw(spaces) for w in words)


def _recase(s: str, draw: st.DrawFn) -> str:
    return "".join(c.upper() if draw(st.booleans()) else c.lower() for c in s)


@FAST
@given(
    st.data(),
    st.lists(
        st.text(alphabet=string.ascii_letters + '-:"', min_size=1, max_size=8),
        min_size=1,
        max_size=4,
    ),
)
def test_fingerprint_invariant_under_whitespace_case_and_key_order(
    data: st.DataObject, words: list[str]
) -> None:
    query = " ".join(words)
    variant = _recase(_respace(words, data.draw), data.draw)
    if any(c.isalnum() for c in query):
        assert _fp("lookup_knowledge", {"query": query}) == _fp(
            "lookup_knowledge", json.dumps({"query": variant})
        )
    else:  # ":" or "--": nothing to look up, refused alike however it is spaced
        for text in (query, variant):
            refused = decode_invocation("lookup_knowledge", "call_1", {"query": text})
            assert isinstance(refused, ErrorResult) and refused.error.code == "SCHEMA"
    lookback = data.draw(st.integers(1, 1440))
    logs_a = {"topic": "APPLICATION", "query": query, "lookback_minutes": lookback}
    logs_b = dict(reversed(list({**logs_a, "query": variant}.items())))
    assert _fp("query_logs", json.dumps(logs_a)) == _fp("query_logs", json.dumps(logs_b))
    column = data.draw(st.sampled_from(["id", "amount", "created_at"]))
    sql_a = f"SELECT {column} FROM orders WHERE status = ? AND note LIKE '%x%' ORDER BY {column}"
    keywords = ["select", column, "from", "orders", "where", "status", "=", "?", "and", "note",
                "like", "'%x%'", "order", "by", column]  # fmt: skip
    sql_b = "".join(
        (
            _recase(w, data.draw)
            if w in {"select", "from", "where", "and", "like", "order", "by"}
            else w
        )
        + data.draw(spaces)
        for w in keywords
    )
    params = data.draw(st.lists(st.integers() | st.text(max_size=5) | st.none(), max_size=3))
    mysql_a = {"data_source": "orders", "sql": sql_a, "params": params}
    mysql_b = {"params": params, "sql": sql_b, "data_source": "orders"}
    assert _fp("query_mysql", json.dumps(mysql_a)) == _fp("query_mysql", mysql_b)

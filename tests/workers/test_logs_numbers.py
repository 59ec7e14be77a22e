"""A non-finite number in a log query is a SCHEMA error, never a number (issue 23)."""

from __future__ import annotations

import pytest

from contracts import ErrorCode, QueryLogsRequest, Topic
from workers.sources import SourceError
from workers.sources.logs.source import (
    Clause,
    MockLogSettings,
    MockLogSource,
    check_fields,
    parse_log_query,
)

NON_FINITE = ["nan", "NaN", "-nan", "inf", "Infinity", "-Infinity", "+inf", "1e999", "-1e999"]


@pytest.mark.parametrize("number", NON_FINITE)
@pytest.mark.parametrize("form", ["http_status:{n}", "http_status:>{n}", "cost_ms:<={n}"])
async def test_non_finite_numbers_are_schema_errors(number: str, form: str) -> None:
    text = form.format(n=number)
    with pytest.raises(SourceError) as caught:
        check_fields(parse_log_query(text), Topic.APPLICATION)
    assert caught.value.code is ErrorCode.SCHEMA, text
    assert "number" in caught.value.message
    source = MockLogSource(MockLogSettings(scenario="db-pool-exhaustion"))
    with pytest.raises(SourceError) as fetched:  # and the tool refuses it before any search
        await source.fetch(QueryLogsRequest(topic=Topic.APPLICATION, query=text))
    assert fetched.value.code is ErrorCode.SCHEMA


def test_the_words_stay_searchable_as_text() -> None:
    # In a text field (or as a plain word) they are text, as before.
    assert parse_log_query("message:nan").clauses == (Clause(field="message", value="nan"),)
    assert parse_log_query("Infinity").clauses == (Clause(value="infinity"),)
    assert parse_log_query("http_status:503").clauses[0].number == 503.0

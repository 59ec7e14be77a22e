"""Query forms an LLM writes from other languages: each refused with SCHEMA saying how to write
it (read literally, each was a substring that almost never occurs: a false "no evidence")."""

from __future__ import annotations

import pytest

from contracts import ErrorCode, EvidenceStatus, QueryLogsRequest, Topic, project_logs
from contracts.bounds import DEFAULT_BOUNDS
from workers.sources import SourceError
from workers.sources.logs.source import MockLogSource, parse_log_query


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("timeout or refused", "or is not supported"),
        ("timeout Or refused", "Or is not supported"),
        ("not health", "not is not supported"),
        ("(timeout)", "parentheses"),
        ("timeout (refused", "parentheses"),
        ("level:(ERROR", "parentheses"),
        ("timeout,", "','"),
        ("timeout, refused", "','"),
        ("level:ERROR,", "','"),
        ("level:ERROR|WARN", "'|'"),
        ("error|warn", "'|'"),
        ("--timeout", "one leading '-'"),
        ("timeout -- refused", "one leading '-'"),
        ("---", "one leading '-'"),
    ],
)
def test_llm_forms_are_schema_errors_that_say_how(text: str, says: str) -> None:
    with pytest.raises(SourceError) as caught:
        parse_log_query(text)
    assert caught.value.code is ErrorCode.SCHEMA
    assert says in caught.value.message


def test_uppercase_or_not_stay_schema_errors() -> None:
    for text in ("timeout OR refused", "NOT health"):
        with pytest.raises(SourceError) as caught:
            parse_log_query(text)
        assert caught.value.code is ErrorCode.SCHEMA


@pytest.mark.parametrize(
    "text", ['"(timeout)"', '"a,b"', 'uri:"/a,b"', '"--verbose"', "-timeout", "timeout and pool"]
)
def test_quoted_and_plain_forms_still_parse(text: str) -> None:
    parse_log_query(text)


def test_lowercase_and_is_ignored_like_AND() -> None:
    assert parse_log_query("timeout and pool") == parse_log_query("timeout AND pool")


async def test_double_dash_no_longer_returns_everything() -> None:
    # Before: `--timeout` excluded only "-timeout" and answered with every record in scope.
    source = MockLogSource()
    with pytest.raises(SourceError) as caught:
        await source.fetch(QueryLogsRequest(topic=Topic.APPLICATION, query="--timeout"))
    assert caught.value.code is ErrorCode.SCHEMA
    found = await source.fetch(QueryLogsRequest(topic=Topic.APPLICATION, query="-timeout"))
    assert project_logs("c", found, DEFAULT_BOUNDS).evidence_status is EvidenceStatus.EVIDENCE_FOUND


@pytest.mark.serial
async def test_an_abandoned_mock_search_stops_its_thread() -> None:
    # Before: the thread of a call past its deadline went on matching (40 long queries held
    # the CPU for seconds after their callers had given up).
    import time

    from workers.sources.logs.deadline import StopFlag

    source = MockLogSource()
    request = QueryLogsRequest(
        topic=Topic.APPLICATION,
        query=" ".join(f"-nothing{i}" for i in range(100)),
        lookback_minutes=1440,
    )
    query = parse_log_query(request.query)
    source.search(request, parse_log_query(""))  # build the world first
    flag = StopFlag(60)
    flag.cancel()
    started = time.monotonic()
    with pytest.raises(SourceError) as caught:
        source.search(request, query, flag)
    assert caught.value.code is ErrorCode.TIMEOUT and time.monotonic() - started < 0.5

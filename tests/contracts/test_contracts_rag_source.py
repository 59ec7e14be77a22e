"""A hit's `source` as the model sees it: no credentials, query strings, fragments or server
paths (issue 23)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts import DEFAULT_BOUNDS, Bounds, LookupKnowledgeRequest, RagResult, project_rag
from contracts.rag import safe_source

REQUEST = LookupKnowledgeRequest(query="pool")


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        # URLs: credentials, query, fragment and ;params go; scheme and host are lower-cased
        (
            "https://user:pw@docs.example.com:8443/runbooks/pool.md?token=abc#frag",
            "https://docs.example.com:8443/runbooks/pool.md",
        ),
        ("http://token@Docs.Example.COM/Path/x.md", "http://docs.example.com/Path/x.md"),
        (
            "HTTPS://docs.example.com/a;jsessionid=XYZ/b.md;v=1?x=1",
            "https://docs.example.com/a/b.md",
        ),
        ("//cdn.example.com/x.md?sig=1", "//cdn.example.com/x.md"),
        ("http://[::1]:8080/x?y=1", "http://[::1]:8080/x"),
        ("s3://bucket/key.md?X-Amz-Signature=abc", "s3://bucket/key.md"),
        ("http://[::1", ""),  # unparsable: dropped, never shown as is
        ("http://host:99999/x", ""),
        # file URLs and server paths: the file name only
        ("file:///srv/rag/docs/pool.md", "pool.md"),
        ("file://fs01/share/x.md?t=1", "x.md"),
        ("file:/srv/x.md?t=1", "x.md"),
        ("/srv/rag/docs/pool.md", "pool.md"),
        ("/srv/rag/docs/", ""),  # no file name: dropped
        ("~/docs/x.md", "x.md"),
        ("C:\\rag\\docs\\x.md", "x.md"),
        ("c:/rag/x.md", "x.md"),
        ("\\\\fs01\\share\\x.md", "x.md"),
        ("user:pw@host:/srv/x.md", "x.md"),
        ("host:~/x.md", "x.md"),
        ("../../etc/passwd", "passwd"),
        ("docs\\..\\..\\x.md", "x.md"),
        # anything else: kept, without a query or fragment (or scp-style credentials)
        ("runbooks/database/pool.md", "runbooks/database/pool.md"),
        ("  db-connection-pool-exhaustion.md ", "db-connection-pool-exhaustion.md"),
        ("pool.md?token=abc", "pool.md"),
        ("kb-123#2", "kb-123"),
        ("git@example.com:org/runbooks.git", "example.com:org/runbooks.git"),
        ("mailto:oncall@example.com?subject=x", "mailto:oncall@example.com"),
        ("urn:isbn:123", "urn:isbn:123"),
        ("", ""),
        ("~", ""),
        ("/srv/..", ""),
    ],
)
def test_safe_source(raw: str, shown: str) -> None:
    assert safe_source(raw) == shown


def test_the_projector_cleans_metadata_urls() -> None:
    hits = [
        {"content": "a", "metadata": {"url": "https://kb.example.com/p?token=s3cr3t"}},
        {"content": "b", "path": "/var/lib/rag/corpus/runbooks/pool.md"},
        {"content": "c", "document": {"uri": "https://bob:hunter2@kb.example.com/x#top"}},
    ]
    result = project_rag(REQUEST, "c1", {"hits": hits}, DEFAULT_BOUNDS)
    assert isinstance(result, RagResult)
    assert [e.source for e in result.evidence] == [
        "https://kb.example.com/p",
        "pool.md",
        "https://kb.example.com/x",
    ]


def test_the_bound_applies_to_the_cleaned_source() -> None:
    hit = {"content": "a", "url": "https://kb.example.com/p?" + "t" * 500}
    result = project_rag(REQUEST, "c1", {"hits": [hit]}, Bounds(rag_field_chars=40))
    assert isinstance(result, RagResult)
    assert result.evidence[0].source == "https://kb.example.com/p" and not result.truncated


secrets = st.text("abcXYZ019", min_size=8, max_size=12).map(lambda s: f"S3cr{s}")
hosts = st.sampled_from(["kb.example.com", "10.0.0.7", "[::1]", "rag"])
paths = st.lists(st.text("abc-_.", min_size=1, max_size=6), max_size=4).map("/".join)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["http", "https", "s3", "HTTP", ""]),
    st.booleans(),
    hosts,
    paths,
    secrets,
    st.sampled_from(["?token={s}", "?a=1&sig={s}", "#{s}", "?x=1#{s}", ";jsessionid={s}"]),
)
def test_no_secret_survives_in_a_url(
    scheme: str, userinfo: bool, host: str, path: str, secret: str, tail: str
) -> None:
    credentials = f"u:{secret}@" if userinfo else ""
    prefix = f"{scheme}:" if scheme else ""
    raw = f"{prefix}//{credentials}{host}/{path}{tail.format(s=secret)}"
    shown = safe_source(raw)
    assert secret not in shown and "?" not in shown and "#" not in shown and "@" not in shown


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["/srv/", "/home/rag/", "~/", "C:\\rag\\", "\\\\fs\\s\\", "file:///var/"]),
    st.lists(st.text("abcdef-_", min_size=1, max_size=6), max_size=3),
    st.text("abcdef-_.", min_size=1, max_size=8).filter(lambda n: n not in (".", "..")),
)
def test_a_server_path_keeps_only_its_file_name(root: str, dirs: list[str], name: str) -> None:
    separator = "\\" if "\\" in root else "/"
    raw = root + "".join(d + separator for d in dirs) + name
    assert safe_source(raw) == name


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_any_text_gives_a_clean_value(raw: str) -> None:
    shown = safe_source(raw)
    assert shown == shown.strip() or not shown.strip()
    assert "?" not in shown and "#" not in shown
    assert not shown.startswith(("/", "\\")) or shown.startswith("//")
    assert shown not in ("~", ".", "..")


def test_a_long_source_is_cleaned_the_same_and_not_remembered() -> None:
    # Short sources are memoised; a long one takes the same path without the memo.
    long_path = "runbooks/" + "a" * 600 + ".md?token=s3cret"
    assert safe_source(long_path) == safe_source(long_path) == "runbooks/" + "a" * 600 + ".md"
    url = "https://user:pw@kb.example.com/" + "p" * 600 + "?sig=x"
    assert "pw" not in safe_source(url) and "sig" not in safe_source(url)

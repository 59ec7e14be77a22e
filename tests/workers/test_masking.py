"""One rule masks a URL's password wherever text leaves the worker: its own log lines
(`workers.logging_setup`) and the log records it serves as evidence (`workers.sources.logs`).

Each case is a password one of the two former rules let through, or both did; every one of them
must be masked on both paths. The rule cannot tell `host:8080/a@b` (a port, then a path holding
`@`) from a password holding `/`: it masks both (a lost port over a shown password).
"""

from __future__ import annotations

import logging
import time

import pytest

from tests.logging_capture import root_restored
from workers.logging_setup import configure_logging
from workers.masking import without_url_password
from workers.sources.logs.masking import without_secret_values, without_secrets

# (text, its password, the text masked)
CASES = [
    # an `@` in the password (the worker's log rule stopped at the first `@` and showed `ss`)
    ("redis://user:p@ss-1@host:6379/0", "p@ss-1", "redis://user:***@host:6379/0"),
    # a URL in JSON that escapes its slashes (the worker's log rule wanted `://`)
    (
        '{"dsn":"https:\\/\\/u:pw-json-2@h.example\\/x"}',
        "pw-json-2",
        '{"dsn":"https:\\/\\/u:***@h.example\\/x"}',
    ),
    ("redis://:tok-nouser-3@cache:6379/0", "tok-nouser-3", "redis://:***@cache:6379/0"),
    # a `/` in the password (SQLAlchemy's URLs allow it; the records' rule stopped at it)
    ("postgresql://app:pa/ss-4@db:5432/x", "pa/ss-4", "postgresql://app:***@db:5432/x"),
    ("mysql://app:pa:ss-5@db/x", "pa:ss-5", "mysql://app:***@db/x"),
    # a user that is a mail address (both rules wanted a user without `@`)
    (
        "smtp://alerts@example.com:mail-pw-6@smtp.example.com:587",
        "mail-pw-6",
        "smtp://alerts@example.com:***@smtp.example.com:587",
    ),
    # a Windows domain user (the records' rule wanted a user without `\`)
    ("smb://CORP\\svc:win-pw-7@files/share", "win-pw-7", "smb://CORP\\svc:***@files/share"),
    # a quote in the password (the records' rule stopped at it)
    ('redis://u:quo"te-8@h:6379', 'quo"te-8', "redis://u:***@h:6379"),
    # a JSON-escaped URL whose password holds `@`
    ("https:\\/\\/u:p@ss-9@h\\/x", "p@ss-9", "https:\\/\\/u:***@h\\/x"),
    (
        "from redis://a:pw-10@h1/0 to redis://b:pw-11@h2/0",
        "pw-1",
        "from redis://a:***@h1/0 to redis://b:***@h2/0",
    ),
]

UNTOUCHED = [
    "GET http://api.internal:8080/orders/12345 200",
    "mail to bob@example.com bounced, see https://status.example.com/mail",
    "conn@5a1c3e2f from 10.42.3.7:8080",
    "ratio 3:2 at 09:00:00 by ops@example.com",
]


@pytest.mark.parametrize(("text", "secret", "masked"), CASES)
def test_every_url_password_is_masked_for_records(text: str, secret: str, masked: str) -> None:
    assert without_url_password(text) == masked
    for shown in (without_secret_values(text), without_secrets(text)):
        assert secret not in shown


@pytest.mark.parametrize("text", UNTOUCHED)
def test_text_without_a_url_password_is_untouched(text: str) -> None:
    assert without_url_password(text) == text


def test_a_port_before_an_at_sign_in_the_path_is_masked_too() -> None:
    # the rule's known cost: `4873/` could be a password holding `/`
    assert without_url_password("GET http://npm:4873/@scope/pkg") == "GET http://npm:***@scope/pkg"


def test_the_workers_own_log_lines_mask_every_url_password() -> None:
    with root_restored() as buffer:
        for json_lines in (True, False):
            configure_logging("INFO", json_lines=json_lines, stream=buffer)
            for text, _, _ in CASES:
                logging.getLogger("aci.test").warning("cannot reach %s", text)
                logging.getLogger("redis.test").warning("cannot reach %s", text)
    out = buffer.getvalue()
    assert out.count("***") >= 4 * len(CASES)
    for _, secret, _ in CASES:
        # JSON lines escape a quote; the text format shows it as is
        assert secret not in out and secret.replace('"', '\\"') not in out


@pytest.mark.parametrize("piece", ["x://a:", "redis://u:", ":\\/\\/u:", '"redis://u:'])
def test_a_hostile_line_is_masked_in_linear_time(piece: str) -> None:
    # every `scheme://user:` opens a password that no `@` ends: a rule that scans to the end
    # of the line from each of them is quadratic (the worker's log rule took 2 s for 10 k)
    line = "from a@b " + piece * 20_000 + " tail"
    started = time.perf_counter()
    assert without_url_password(line) == line
    assert time.perf_counter() - started < 1.0
    # with an `@` at its end, the first opening's password runs to it
    masked = without_url_password(line.replace(" tail", "@h tail"))
    assert masked == f"from a@b {piece}***@h tail"


# A third-party logger's message loses its addresses and query strings (`logging_setup`); a
# password that looks like one (`2024!Spring` holds `app:2024`, `pa?ss` a `?`) must be masked
# before that, or the rewrite takes the `user:` the rule opens on and shows the rest.
THIRD_PARTY = [
    ("redis://app:2024!Spring-13@cache:6379/0", "!Spring-13"),
    ("redis://app:12-secret-14@cache/0", "-secret-14"),
    ("postgres://u:99.bottles-15@db/x", ".bottles-15"),
    ("http://u:pa?ss-16@h/x", "ss-16"),
]


def test_a_third_party_log_line_masks_a_password_that_looks_like_an_address() -> None:
    with root_restored() as buffer:
        configure_logging("INFO", stream=buffer)
        for text, _ in THIRD_PARTY:
            logging.getLogger("httpx").warning("HTTP Request: GET %s", text)
    out = buffer.getvalue()
    assert out.count("***") == len(THIRD_PARTY)
    for _, part in THIRD_PARTY:
        assert part not in out


def test_a_url_in_json_inside_json_is_masked() -> None:
    # Docker's json-file line of an app line that escapes its slashes: `:\\/\\/` (PHP's
    # json_encode, Jackson's option); one rule for every depth of escaping
    line = '{"log":"{\\"dsn\\":\\"postgres:\\\\/\\\\/app:dbl-esc-17@db\\\\/app\\"}\\n"}'
    masked = '{"log":"{\\"dsn\\":\\"postgres:\\\\/\\\\/app:***@db\\\\/app\\"}\\n"}'
    assert without_url_password(line) == masked
    assert "dbl-esc-17" not in without_secrets(line)


# Compact JSON (Go's, Node's loggers; Docker's own lines) has no space to end a password at: a
# URL inside a JSON string ends at the string's closing quote (a quote inside it is `\"`), so
# the members after it stay, and the URL is not shown with a later member's mail domain as host.
COMPACT = [
    (
        '{"dsn":"postgres://app:s3cret-18@db:5432/app","user":"alice@example.com","n":1}',
        '{"dsn":"postgres://app:***@db:5432/app","user":"alice@example.com","n":1}',
    ),
    (
        '{"msg":"dsn=postgres:\\/\\/app:s3cret-19@db\\/app","user":"alice@example.com"}',
        '{"msg":"dsn=postgres:\\/\\/app:***@db\\/app","user":"alice@example.com"}',
    ),
    (  # a password holding `@` and `"` (escaped in JSON) is masked whole
        '["redis://u:p@\\"ss-20@h1:6379","bob@example.com"]',
        '["redis://u:***@h1:6379","bob@example.com"]',
    ),
    (  # not JSON: a bare quote then `,` inside the password is no string's end
        'dsn="redis://u:quo",te-21@h:6379" next',
        'dsn="redis://u:***@h:6379" next',
    ),
]


@pytest.mark.parametrize(("line", "masked"), COMPACT)
def test_a_url_in_a_compact_json_string_ends_at_its_closing_quote(line: str, masked: str) -> None:
    assert without_url_password(line) == masked


def test_many_urls_in_one_compact_json_line_are_masked_in_linear_time() -> None:
    line = '{"a":[' + '"redis://u:pw@h",' * 50_000 + '"end"]}'
    started = time.perf_counter()
    masked = without_url_password(line)
    assert time.perf_counter() - started < 1.0
    assert masked == line.replace(":pw@", ":***@")


def test_a_quoted_url_that_is_no_json_may_show_a_password_part_after_a_bare_quote() -> None:
    # the JSON rule's known cost: `a@b",c` unescaped reads as a string's end after `a`
    assert without_url_password('"redis://u:a@b",c@h"') == '"redis://u:***@b",c@h"'


def test_a_third_party_log_line_of_one_long_word_is_written_in_linear_time() -> None:
    # its addresses are rewritten (`host:6379`): a rule that tries every letter of a word as
    # an address's start reads the word again from each (50 000 letters: 10 s)
    word = "a" * 50_000
    with root_restored() as buffer:
        configure_logging("INFO", stream=buffer)
        started = time.perf_counter()
        logging.getLogger("httpx").warning("bad response %s from cache:6379", word)
        elapsed = time.perf_counter() - started
    assert word in buffer.getvalue() and "<address>" in buffer.getvalue()
    assert elapsed < 1.0, elapsed

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
from workers.masking import without_passwords, without_url_password
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


# Passwords a DSN or a URL holds in the forms real programs log. The URLs were masked already
# (pinned here); a password under its name (`password=`, `PGPASSWORD=`, `"password": "..."`,
# Python's `{'password': '...'}`, a quoted value holding a space) reached the worker's own
# log lines whole, and the served records' values when quoted.
URL_FORMS = [
    ("postgres://app:p%40ss%2Fw@db/x", "postgres://app:***@db/x"),
    ("redis://:s3cr%3Ar@cache:6379", "redis://:***@cache:6379"),
    ("amqp://guest:guest@rabbit", "amqp://guest:***@rabbit"),
    ("mongodb+srv://u:p@cluster0.x.net/db", "mongodb+srv://u:***@cluster0.x.net/db"),
]


@pytest.mark.parametrize(("text", "masked"), URL_FORMS)
def test_percent_encoded_and_other_scheme_passwords_are_masked(text: str, masked: str) -> None:
    assert without_url_password(text) == masked
    assert without_secret_values(text) == masked and without_secrets(text) == masked


# (text, its password, the text masked)
NAMED = [
    ("dsn host=db user=app password=S3cret-n1 dbname=x", "S3cret-n1",
     "dsn host=db user=app password=*** dbname=x"),
    ("auth failed, passwd: S3cret-n2", "S3cret-n2", "auth failed, passwd: ***"),
    ('{"user": "app", "password": "S3cret-n3"}', "S3cret-n3",
     '{"user": "app", "password": "***"}'),
    ("env PGPASSWORD=S3cret-n4 psql -h db", "S3cret-n4", "env PGPASSWORD=*** psql -h db"),
    ("connect({'host': 'db', 'password': 'S3cret-n5'})", "S3cret-n5",
     "connect({'host': 'db', 'password': '***'})"),
    ('conninfo password="S3 cret-n6" host=db', "cret-n6", 'conninfo password="***" host=db'),
    ("MYSQL_PWD=S3cret-n7", "S3cret-n7", "MYSQL_PWD=***"),
    ("Password = S3cret-n8;Server=db", "S3cret-n8", "Password = ***;Server=db"),
    ('{\\"password\\":\\"S3cret-n9\\"}', "S3cret-n9", '{\\"password\\":\\"***\\"}'),
]  # fmt: skip

# Ordinary words about passwords, and names that are no password's, stay as they are.
PLAIN_WORDS = [
    "the password was wrong for user bob",
    "passwords: 3 rotated, 0 expired",
    "password reset requested by alice@example.com",
    "bypass=true compass: north passenger=12",
    "key: orders:v1 session=abc host=db",
]


@pytest.mark.parametrize(("text", "secret", "masked"), NAMED)
def test_a_password_under_its_name_is_masked_in_records(
    text: str, secret: str, masked: str
) -> None:
    assert without_secret_values(text) == masked
    assert secret not in without_secrets(text)


def test_the_workers_own_log_lines_mask_a_password_under_its_name() -> None:
    with root_restored() as buffer:
        for json_lines in (True, False):
            configure_logging("INFO", json_lines=json_lines, stream=buffer)
            for text, _, _ in NAMED:
                logging.getLogger("aci.test").warning("cannot connect: %s", text)
                logging.getLogger("pymysql.test").warning("cannot connect: %s", text)
    out = buffer.getvalue()
    for _, secret, _ in NAMED:
        assert secret not in out, secret


def test_ordinary_words_are_not_masked_in_the_workers_log_lines() -> None:
    with root_restored() as buffer:
        configure_logging("INFO", stream=buffer)
        for text in PLAIN_WORDS:
            logging.getLogger("aci.test").warning("%s", text)
    out = buffer.getvalue()
    assert "***" not in out
    for text in PLAIN_WORDS:
        assert text in out


@pytest.mark.parametrize("text", PLAIN_WORDS[:3])
def test_ordinary_words_about_passwords_are_not_masked_in_records(text: str) -> None:
    assert without_secret_values(text) == text and without_secrets(text) == text


# A password holding a literal space is no well-formed URL (RFC 3986 wants `%20`), but a
# person types one: the password runs over the space to the `@` when what follows the opening
# is no port and no path (a URL ends at whitespace otherwise: `cache:6379 as alice@x` stays).
SPACED = [
    ("postgres://app:p ss@db/x", "postgres://app:***@db/x"),
    ("amqp://u:correct horse battery@rabbit:5672", "amqp://u:***@rabbit:5672"),
]
NOT_SPACED = [
    "connected to redis://cache:6379 as alice@example.com",
    "GET http://api.internal:8080/orders by bob@example.com",
    "redis://cache:6379, then mail to ops@example.com",
]


@pytest.mark.parametrize(("text", "masked"), SPACED)
def test_a_url_password_holding_a_space_is_masked(text: str, masked: str) -> None:
    assert without_url_password(text) == masked
    assert without_secret_values(text) == masked


@pytest.mark.parametrize("text", NOT_SPACED)
def test_a_port_then_a_mail_address_is_not_a_spaced_password(text: str) -> None:
    assert without_url_password(text) == text


def _mask_and_log(line: str) -> float:
    # seconds to mask the line and to log it through the worker's own formatter
    started = time.perf_counter()
    without_secrets(line)
    with root_restored() as buffer:
        configure_logging("INFO", stream=buffer)
        logging.getLogger("aci.test").warning("%s", line)
    return time.perf_counter() - started


@pytest.mark.parametrize(
    ("head", "unit", "count", "tail"),
    [
        ("", "password=", 200_000, ""),
        ('password="', "a", 1_000_000, ""),
        ("", "x: ", 300_000, ""),
        ("", "a", 1_000_000, ""),
        ("", "'password': '", 100_000, ""),
        ("", "x://a:b ", 100_000, "c@h"),
        ("", "x://a:b c", 100_000, "@h"),
    ],
)
def test_named_and_spaced_masking_is_linear_on_a_1mb_line(
    head: str, unit: str, count: int, tail: str
) -> None:
    # Linear: a line four times longer costs about four times as much (a quadratic rule, 16
    # times), and a 1 MB line takes about a second at most; measured as a ratio, so a loaded
    # machine (make test runs two processes) slows both alike.
    quarter = _mask_and_log(head + unit * (count // 4) + tail)
    whole = _mask_and_log(head + unit * count + tail)
    assert whole < 8 * quarter + 0.5, (quarter, whole)
    assert whole < 5.0


# Chinese and Japanese names of a password (its own lines may quote a user's or a runbook's),
# a fullwidth separator after an English one; a sentence about a password without one stays.
CJK = [
    ("连接失败，密码：S3cret-c1，请重试", "连接失败，密码：***，请重试"),  # noqa: RUF001
    ("数据库口令=S3cret-c2", "数据库口令=***"),
    ("パスワード＝S3cret-c3", "パスワード＝***"),  # noqa: RUF001
    ("password：S3cret-c4 rejected", "password：*** rejected"),  # noqa: RUF001
]


@pytest.mark.parametrize(("text", "masked"), CJK)
def test_the_workers_own_log_lines_mask_a_password_under_a_cjk_name(text: str, masked: str) -> None:
    assert without_passwords(text) == masked
    for kept in ("用户密码错误", "修改密码成功", "密码错误：用户 admin"):  # noqa: RUF001
        assert without_passwords(kept) == kept


# A URL percent-encoded whole inside another URL's query (a login's `next=`, an OAuth
# `redirect_uri=`): its password between the encoded `user%3A` and `%40`; a percent-encoded
# `@` inside a plain URL's password is one of its characters.
ENCODED = [
    ("GET /login?next=https%3A%2F%2Fuser%3AS3cret-e1%40db%2F ok",
     "GET /login?next=https%3A%2F%2Fuser%3A***%40db%2F ok"),
    ("redirect_uri=postgres%3a%2f%2fapp%3aS3cret-e2%40db%3a5432%2fx&state=1",
     "redirect_uri=postgres%3a%2f%2fapp%3a***%40db%3a5432%2fx&state=1"),
    ("next=https%3A%2F%2Fu%3AS3c%2540ret-e3%40h&to=ops%40example.com",
     "next=https%3A%2F%2Fu%3A***%40h&to=ops%40example.com"),
    ("scheme://user:S3c%40ret-e4@host/x", "scheme://user:***@host/x"),
]  # fmt: skip
NOT_ENCODED = [
    "https://u%3AS3cret%40host",  # no `@`: a host's name, percent-encoded
    "next=https%3A%2F%2Fdb%2Fpath%40v2 ok",  # no user
    "mail=ops%40example.com path=a%3Ab",
]


@pytest.mark.parametrize(("text", "masked"), ENCODED)
def test_a_password_of_a_percent_encoded_url_is_masked(text: str, masked: str) -> None:
    assert without_url_password(text) == masked
    assert without_passwords(text) == masked
    assert without_secret_values(text) == masked and without_secrets(text) == masked


@pytest.mark.parametrize("text", NOT_ENCODED)
def test_percent_encoded_text_without_a_password_is_untouched(text: str) -> None:
    assert without_url_password(text) == text


def test_the_workers_own_log_lines_mask_a_percent_encoded_urls_password() -> None:
    with root_restored() as buffer:
        for json_lines in (True, False):
            configure_logging("INFO", json_lines=json_lines, stream=buffer)
            for text, _ in ENCODED:
                logging.getLogger("aci.test").warning("redirect: %s", text)
                logging.getLogger("httpx").warning("redirect: %s", text)
    assert "S3c" not in buffer.getvalue()


@pytest.mark.parametrize(
    "unit", ["%3A%2F%2Fu%3A", "%3A%2F%2Fu%3Ap%40", "%3a%2f%2f" + "u" * 50, "x%40"]
)
def test_the_percent_encoded_rule_is_linear_on_a_1mb_line(unit: str) -> None:
    def seconds(line: str) -> float:  # the best of three
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            without_url_password(line)
            best = min(best, time.perf_counter() - started)
        return best

    count = 1_000_000 // len(unit)
    quarter, whole = seconds(unit * (count // 4)), seconds(unit * count)
    assert whole < 8 * quarter + 0.3 and whole < 5.0, (quarter, whole)

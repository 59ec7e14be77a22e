"""Secrets in log records never reach an answer: masked (`***`) in every record's message and
field values before it is matched, mined into patterns or served, on FILE (every format) and
CLICKHOUSE alike (`workers.sources.logs.masking.without_log_secrets`, docs/logs.md "Secrets").

A query matches the masked text: a term found only inside a secret matches nothing, so an
answer never confirms a guess at a secret either.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from logs_helpers import cpu_seconds, file_source, project, search
from test_logs_clickhouse import fetch, make_table, row, source_for

from contracts import ErrorCode, EvidenceStatus, LogsUpstream, Topic
from workers.sources import SourceError
from workers.sources.logs.masking import log_secret_name, mask_fields, without_log_secrets
from workers.sources.logs.templates import mine

NOW = 1_796_400_000.0  # 2026-12-04T16:00:00Z
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sIg-77"
BASIC = "dXNlcjpwYXNzLTc4"  # user:pass-78
PEM_BODY = "MIIEpAIBAAKCAQEA7key79"

# (text, its secret, the text masked)
MASKED = [
    ("connecting with password=S3cretPw-91", "S3cretPw-91", "connecting with password=***"),
    ("PGPASSWORD=S3cretPw-92 psql -h db", "S3cretPw-92", "PGPASSWORD=*** psql -h db"),
    ('{"password": "S3cret Pw 93"}', "Pw 93", '{"password": "***"}'),
    ("postgres://app:S3cretPw-94@db/x", "S3cretPw-94", "postgres://app:***@db/x"),
    (f"Authorization: Bearer {JWT}", JWT, "Authorization: Bearer ***"),
    (f"Authorization: Basic {BASIC}", BASIC, "Authorization: Basic ***"),
    (f"calling upstream with bearer {JWT} again", JWT, "calling upstream with bearer *** again"),
    ("Authorization: token ghp_S3cret95", "ghp_S3cret95", "Authorization: token ***"),
    ("api_key=AIzaS3cret96 user=bob", "AIzaS3cret96", "api_key=*** user=bob"),
    ('{"client_secret":"S3cretPw-97","id":7}', "S3cretPw-97", '{"client_secret":"***","id":7}'),
    ("X-Api-Key: S3cretPw-98 sent", "S3cretPw-98", "X-Api-Key: *** sent"),
    ("password=hunter rejected", "hunter", "password=*** rejected"),  # a word: still a password
    (
        f"loaded -----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY----- ok",
        PEM_BODY,
        "loaded -----BEGIN RSA PRIVATE KEY-----***-----END RSA PRIVATE KEY----- ok",
    ),
    # SQL in a query log: MySQL's and PostgreSQL's ways to set a password
    (
        "CREATE USER 'app'@'%' IDENTIFIED BY 'S3cret Pw'",
        "S3cret",
        "CREATE USER 'app'@'%' IDENTIFIED BY '***'",
    ),
    (
        "ALTER USER app IDENTIFIED WITH caching_sha2_password BY 'S3cret' ;",
        "S3cret",
        "ALTER USER app IDENTIFIED WITH caching_sha2_password BY '***' ;",
    ),
    ("SET PASSWORD FOR 'bob'@'%' = 'S3cret'", "S3cret", "SET PASSWORD FOR 'bob'@'%' = '***'"),
    (
        "ALTER ROLE app WITH LOGIN PASSWORD 'S3c\\'ret' VALID UNTIL 'infinity'",
        "ret",
        "ALTER ROLE app WITH LOGIN PASSWORD '***' VALID UNTIL 'infinity'",
    ),
    (  # in JSON, its line breaks escaped, cut short: masked to the end
        f'{{"key":"-----BEGIN PRIVATE KEY-----\\n{PEM_BODY}',
        PEM_BODY,
        '{"key":"-----BEGIN PRIVATE KEY-----***',
    ),
    # Rails' parameters and Ruby's, PHP's and Perl's hashes: `=>`, not `=` or `:`
    (
        'Parameters: {"user"=>{"email"=>"a@b.c", "password"=>"S3cretPw-81"}}',
        "S3cretPw-81",
        'Parameters: {"user"=>{"email"=>"a@b.c", "password"=>"***"}}',
    ),
    (
        "{:password => 'S3cretPw-82', :user => 'bob'}",
        "S3cretPw-82",
        "{:password => '***', :user => 'bob'}",
    ),
    ("    [password] => S3cretPw-83", "S3cretPw-83", "    [password] => ***"),
    # a form's bracketed names (Rails', PHP's) in a query string or a request body
    (
        "POST /login user[email]=a%40b.c&user[password]=S3cretPw-84&x=1",
        "S3cretPw-84",
        "POST /login user[email]=a%40b.c&user[password]=***&x=1",
    ),
    # an OpenPGP private key block (armoured like PEM, `BLOCK` after `KEY`)
    (
        f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n{PEM_BODY}\n-----END PGP PRIVATE KEY BLOCK-----",
        PEM_BODY,
        "-----BEGIN PGP PRIVATE KEY BLOCK-----***-----END PGP PRIVATE KEY BLOCK-----",
    ),
]

# Evidence that merely looks like a secret's name: never masked.
KEPT = [
    "cache miss key=user:42 ttl=300",
    "GET key: session:abc from redis",
    "cacheKey=orders:7 partition_key=eu-1",
    "token_count=512 max_tokens=4096 prompt_tokens=12",
    "token: expired for user bob",
    "failed to refresh token: dial tcp 10.0.0.1:443: i/o timeout",
    "Basic authentication failed for bob",
    "auth=failed secret_name=db-creds key_id=AKIAEXAMPLE",
    "bearer token missing",
    "KEYSPACE events, monkey=3",
    "Failed password for root from 10.0.0.1 port 22 ssh2",
    "nats: Plaintext passwords detected, clients will be identified by name",
    "12:34:56 INFO GET /api/orders/42 200 in 5ms",
    # systemd's target and sudo's working directory (Filebeat's system samples)
    "Stopped target Basic System.",
    "Reached target Basic System, reached target Sockets.",
    "sudo: vagrant : TTY=pts/0 ; PWD=/home/vagrant ; USER=root ; COMMAND=/bin/ls",
    "cd from OLDPWD=/srv/old to PWD=/srv/app",
    # MySQL's and MariaDB's refused login says whether a password was sent, not what it is:
    # YES (a wrong one) or NO (none: a client's configuration). Masked, an on-call engineer
    # could not tell the two (`(using password: ***`, its parenthesis gone too); found by a
    # new user's pass over MariaDB 10.11's error log.
    "Access denied for user 'root'@'localhost' (using password: YES)",
    "Access denied for user 'shop'@'10.0.0.7' (using password: NO)",
]


@pytest.mark.parametrize(("text", "secret", "masked"), MASKED)
def test_every_secret_in_a_log_text_is_masked(text: str, secret: str, masked: str) -> None:
    assert without_log_secrets(text) == masked
    assert secret not in without_log_secrets(text)


@pytest.mark.parametrize("text", KEPT)
def test_evidence_that_looks_like_a_secret_name_is_kept(text: str) -> None:
    assert without_log_secrets(text) == text


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("Authorization: Basic dXNlcjpwYXNz.", "Authorization: Basic ***."),
        ("MYSQL_PWD=hunter2 mysql -h db", "MYSQL_PWD=*** mysql -h db"),
        ("pwd=/hunter2", "pwd=***"),
        ("PWD=hunter2", "PWD=***"),
        # a known scheme's credential whatever its length (GitHub's `token`, NTLM)
        ("Authorization: token ghp_x9Z", "Authorization: token ***"),
        ("authorization: NTLM TlRMTVNT", "authorization: *** ***"),  # NTLM: no prose word
    ],
)
def test_a_credential_beside_those_words_is_still_masked(text: str, masked: str) -> None:
    assert without_log_secrets(text) == masked


def test_a_field_under_a_secret_name_is_masked_whole() -> None:
    fields: dict[str, object] = {
        "password": "S3cret", "db_password": 123456, "access_token": "abc.def",
        "token_count": 512, "key": "user:42", "auth": "failed", "enabled": True,
        "url": "redis://u:S3cret@h/0", "note": "sent password=S3cret", "sessionId": "s-9",
    }  # fmt: skip
    mask_fields(fields)  # type: ignore[arg-type]
    assert fields == {
        "password": "***", "db_password": "***", "access_token": "***", "token_count": 512,
        "key": "user:42", "auth": "failed", "enabled": True, "url": "redis://u:***@h/0",
        "note": "sent password=***", "sessionId": "***",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("name", "secret"),
    [("password", True), ("PGPASSWORD", True), ("api_key", True), ("apiKey", True),
     ("x-api-key", True), ("client_secret", True), ("refresh_token", True),
     ("session_id", True), ("Authorization", True), ("password_file", False), ("password_hash", True),
     ("key", False), ("cache_key", False), ("cacheKey", False), ("token_count", False),
     ("max_tokens", False), ("key_id", False), ("token_type", False), ("author", False),
     ("keyspace", False)],
)  # fmt: skip
def test_log_secret_names(name: str, secret: bool) -> None:
    assert log_secret_name(name) is secret


@pytest.mark.parametrize(
    ("head", "unit", "count"),
    [
        ("", "Bearer ", 150_000),
        ("bearer\t", " ", 1_000_000),
        ("", "-----BEGIN RSA PRIVATE KEY-----", 30_000),
        ("-----BEGIN ", "A ", 500_000),
        ("", "authorization: token ", 50_000),
        ("", "Authorization: Basic ", 50_000),
        ("", "token=", 200_000),
        ("", "token: expired ", 70_000),
        ('token="', "a", 1_000_000),
        ("", "token=a ", 150_000),
        ("", "key", 300_000),
        ("", "password '", 100_000),
        ("", "IDENTIFIED BY '", 70_000),
        ("", "identified with ", 70_000),
    ],
)
def test_log_masking_is_linear_on_a_1mb_line(head: str, unit: str, count: int) -> None:
    # Linear: a line four times longer costs about four times as much (a quadratic rule, 16
    # times); measured as a ratio, so a loaded machine slows both alike, beside a ceiling.
    def seconds(line: str) -> float:
        return cpu_seconds(lambda: without_log_secrets(line), repeat=1)

    quarter = seconds(head + unit * (count // 4))
    whole = seconds(head + unit * count)
    assert whole < 8 * quarter + 0.3, (quarter, whole)
    assert whole < 5.0


def test_templates_show_the_masked_form_and_one_kind_of_line_stays_one_template() -> None:
    lines = [f"connecting to db as app with password={p}" for p in
             ("S3cret-1", "hunter", "x9Y!zz", "424242", "p@ss")]  # fmt: skip
    masked = {without_log_secrets(line) for line in lines}
    assert masked == {"connecting to db as app with password=***"}
    assert set(mine(sorted(masked)).values()) == {"connecting to db as app with password=***"}


# --- FILE, one file per format the project reads -------------------------------------------

FILES = {
    "jsonl": (
        "app.jsonl",
        '{"ts":"2026-12-04T15:40:00Z","level":"info","msg":"connecting with '
        'password=S3cretPw-91","service":"api"}\n'
        '{"ts":"2026-12-04T15:40:01Z","level":"info","msg":"db up","dsn":'
        '"postgres://app:S3cretPw-94@db/x"}\n'
        f'{{"ts":"2026-12-04T15:40:02Z","level":"warn","msg":"upstream call",'
        f'"headers":"Authorization: Bearer {JWT}"}}\n'
        '{"ts":"2026-12-04T15:40:03Z","level":"info","msg":"login","password":"S3cretPw-93",'
        '"token_count":512,"key":"user:42"}\n'
        '{"ts":"2026-12-04T15:40:04Z","level":"info","msg":"{\\"password\\": \\"S3cretPw-95\\"}"}\n',
    ),
    "logfmt": (
        "app.log",
        'time=2026-12-04T15:40:00Z level=info msg="PGPASSWORD=S3cretPw-92 psql" '
        "password=S3cretPw-96\n"
        f'time=2026-12-04T15:40:01Z level=error msg="Authorization: Basic {BASIC} refused"\n',
    ),
    "plain": (
        "app.log",
        f"2026-12-04 15:40:00 ERROR Authorization: Basic {BASIC} refused\n"
        "2026-12-04 15:40:01 INFO connecting with password=S3cretPw-91\n",
    ),
    "log4j": (
        "app.log",
        "2026-12-04T15:40:00,000 INFO  [main] com.shop.Keys - loaded key\n"
        "-----BEGIN PRIVATE KEY-----\n"
        f"{PEM_BODY}\n"
        "-----END PRIVATE KEY-----\n"
        "2026-12-04T15:40:01,000 WARN  [main] com.shop.Db - url postgres://app:S3cretPw-94@db/x\n",
    ),
    "regex": (
        "app.log",
        "2026-12-04T15:40:00Z|E|login failed for bob with password=S3cretPw-91\n"
        f"2026-12-04T15:40:01Z|W|sent Bearer {JWT}\n",
    ),
    "syslog": (
        "syslog",
        "Dec  4 15:40:00 web1 app[12]: connecting to redis://:S3cretPw-97@cache:6379/0\n"
        f"Dec  4 15:40:01 web1 app[12]: upstream said Authorization: Bearer {JWT}\n",
    ),
    "docker": (
        "c-json.log",
        '{"log":"login with password=S3cretPw-91\\n","stream":"stdout",'
        '"time":"2026-12-04T15:40:00.000000000Z"}\n'
        f'{{"log":"sent Authorization: Basic {BASIC}\\n","stream":"stderr",'
        '"time":"2026-12-04T15:40:01.000000000Z"}\n',
    ),
}
SECRETS = ("S3cretPw", JWT, BASIC, PEM_BODY, "sIg-77")
REGEX = "pattern = '(?P<time>[^|]+)\\|(?P<level>\\w)\\|(?P<message>.*)'\n"


def _shown(found: LogsUpstream) -> str:
    return msgspec.json.encode(found).decode() + msgspec.json.encode(project(found)).decode()


@pytest.mark.parametrize("fmt", sorted(FILES))
def test_file_records_show_no_secret_in_any_format(tmp_path: Path, fmt: str) -> None:
    name, text = FILES[fmt]
    (tmp_path / name).write_text(text)
    extra = REGEX if fmt == "regex" else ""
    source = file_source(tmp_path, fmt, [name], now=NOW, extra=extra)
    found = search(source, "", lookback=60)
    assert found.match_count == text.count("\n2026") + text.startswith("2026") or found.records
    shown = _shown(found)
    assert "***" in shown
    for secret in SECRETS:
        assert secret not in shown, (fmt, secret)
        # a query for the secret's text matches nothing: no answer confirms a guess
        guess = search(source, f'"{secret[:8]}"', lookback=60)
        assert guess.match_count == 0 and not guess.records, (fmt, secret)
    assert all(p.template.count("***") <= 2 for p in found.patterns)


def test_file_patterns_group_lines_that_differ_only_in_their_secret(tmp_path: Path) -> None:
    lines = [
        f'{{"ts":"2026-12-04T15:4{i}:00Z","level":"info","msg":"connecting to db as app with '
        f'password={p}"}}\n'
        for i, p in enumerate(("S3cretPw-1", "hunter", "x9Y!zz", "p@ss", "Zq8-long-secret-value"))
    ]
    (tmp_path / "app.jsonl").write_text("".join(lines))
    found = search(file_source(tmp_path, "jsonl", ["app.jsonl"], now=NOW), "password", 60)
    assert found.match_count == 5
    assert [(p.template, p.count) for p in found.patterns] == [
        ("connecting to db as app with password=***", 5)
    ]
    assert {r.message for r in found.records} == {"connecting to db as app with password=***"}


def test_file_unparsed_lines_matched_as_text_are_masked(tmp_path: Path) -> None:
    (tmp_path / "app.jsonl").write_text(
        '{"ts":"2026-12-04T15:40:00Z","level":"info","msg":"start failed"}\n'
        "not json: password=S3cretPw-99 failed\n"
    )
    found = search(file_source(tmp_path, "jsonl", ["app.jsonl"], now=NOW), "failed", 60)
    assert found.match_count == 2
    assert "not json: password=*** failed" in {r.message for r in found.records}
    assert "S3cretPw" not in _shown(found)


# --- CLICKHOUSE, on the in-process engine ---------------------------------------------------


@pytest.fixture(scope="module")
def secret_table() -> str:
    return make_table(
        [
            row(100, "INFO", "api", "connecting with password=S3cretPw-91", uri="/login"),
            row(90, "WARN", "api", f"upstream call Authorization: Bearer {JWT}"),
            row(80, "INFO", "api", "db up", dsn="postgres://app:S3cretPw-94@db/x"),
            row(70, "INFO", "api", "login", password="S3cretPw-93", key="user:42"),
            row(60, "ERROR", "api", f"Authorization: Basic {BASIC} refused"),
            row(50, "INFO", "api", f"key -----BEGIN PRIVATE KEY-----\n{PEM_BODY}\n-----END"),
        ]
    )


async def test_clickhouse_records_show_no_secret(secret_table: str) -> None:
    source = source_for(secret_table)
    found = await fetch(source, "")
    assert found.match_count == 6
    shown = _shown(found)
    assert "***" in shown and "user:42" in shown
    for secret in SECRETS:
        assert secret not in shown, secret
    messages = {r.message for r in found.records}
    assert "connecting with password=***" in messages
    assert "upstream call Authorization: Bearer ***" in messages


@pytest.mark.parametrize("guess", ["S3cretPw", JWT[:12], BASIC[:10], PEM_BODY[:10]])
async def test_clickhouse_a_query_matching_only_a_secret_matches_nothing(
    secret_table: str, guess: str
) -> None:
    found = await fetch(source_for(secret_table), f'"{guess}"')
    assert found.match_count == 0 and not found.records and not found.patterns
    assert project(found).evidence_status is EvidenceStatus.NO_EVIDENCE


async def test_clickhouse_and_file_show_the_same_masked_text(
    secret_table: str, tmp_path: Path
) -> None:
    body = "connecting with password=S3cretPw-91"
    (tmp_path / "app.log").write_text(
        '{"ts":"2026-12-04T15:58:20Z","level":"info","msg":"' + body + '","service":"api"}\n'
    )
    on_file = search(file_source(tmp_path, "jsonl", ["app.log"], now=NOW), "connecting", 60)
    on_clickhouse = await fetch(source_for(secret_table), "connecting")
    assert [r.message for r in on_file.records] == [r.message for r in on_clickhouse.records]
    assert [p.template for p in on_file.patterns] == [p.template for p in on_clickhouse.patterns]


def test_topic_is_application() -> None:
    assert Topic.APPLICATION.value == "APPLICATION"


def test_file_a_query_for_the_masked_form_finds_it(tmp_path: Path) -> None:
    # the prefilter reads the raw line: a term holding the mask's `*` is not looked for there
    (tmp_path / "app.jsonl").write_text(
        '{"ts":"2026-12-04T15:40:00Z","level":"info","msg":"login with password=S3cretPw-1"}\n'
    )
    found = search(file_source(tmp_path, "jsonl", ["app.jsonl"], now=NOW), '"password=***"', 60)
    assert found.match_count == 1


async def test_clickhouse_rows_left_unread_after_secret_only_matches_are_not_counted() -> None:
    table = make_table(
        [
            row(10, "INFO", "api", "login with password=S3cretPw-1"),
            row(20, "INFO", "api", "login with password=S3cretPw-2"),
            row(30, "INFO", "api", "rotated S3cretPw-3 in the vault"),  # the term as text
            row(40, "INFO", "api", "rotated S3cretPw-4 in the vault"),
        ]
    )
    # the newest two rows (the row limit) matched only by their secrets: the store's count
    # of 4 is not shown (it would confirm the guess); nothing else was read: no "no evidence"
    with pytest.raises(SourceError) as raised:
        await fetch(source_for(table, "row_limit = 2\n"), '"S3cretPw"')
    assert raised.value.code is ErrorCode.EXECUTION and "S3cret" not in str(raised.value)
    # the rows read that still match are counted, as a lower bound
    found = await fetch(source_for(table, "row_limit = 3\n"), '"S3cretPw"')
    assert found.match_count == 1 and found.match_count_lower_bound
    assert [r.message for r in found.records] == ["rotated S3cretPw-3 in the vault"]
    # every row read: the exact count over the masked text
    exact = await fetch(source_for(table, "row_limit = 10\n"), '"S3cretPw"')
    assert exact.match_count == 2 and not exact.match_count_lower_bound


def test_the_mock_world_goes_through_the_masking_and_loses_no_evidence() -> None:
    # MOCK's records are the project's own: masked on the one path, they hold no secret and
    # no false positive, so the masked world is the world as generated
    from workers.sources.logs.mocklog import DEFAULT_SCENARIO, index_of
    from workers.sources.logs.mocklog.scenarios import world_of

    generated = world_of(DEFAULT_SCENARIO)
    served = index_of(DEFAULT_SCENARIO).world
    assert served.records == generated.records


def test_a_private_key_over_lines_read_as_text_shows_no_line_of_its_body(tmp_path: Path) -> None:
    # jsonl: the key's lines are no record; each is matched as text, the body masked whole
    (tmp_path / "app.jsonl").write_text(
        '{"ts":"2026-12-04T15:40:00Z","level":"info","msg":"loaded MIIE key"}\n'
        "-----BEGIN EC PRIVATE KEY-----\n"
        f"{PEM_BODY}\n"
        "MIIEsecondLine\n"
        "-----END EC PRIVATE KEY----- MIIE after\n"
        "MIIE plain text\n"
    )
    found = search(file_source(tmp_path, "jsonl", ["app.jsonl"], now=NOW), "MIIE", 60)
    assert sorted(r.message for r in found.records) == [
        "***-----END EC PRIVATE KEY----- MIIE after", "MIIE plain text", "loaded MIIE key",
    ]  # fmt: skip
    assert PEM_BODY not in _shown(found)


def test_file_a_term_excluded_only_inside_a_secret_excludes_nothing(tmp_path: Path) -> None:
    # matched masked: `-"S3cretPw"` excludes no record whose only `S3cretPw` was a secret
    # (excluding it would confirm the guess as surely as finding it)
    (tmp_path / "app.jsonl").write_text(
        '{"ts":"2026-12-04T15:40:00Z","level":"info","msg":"login with password=S3cretPw-1"}\n'
        '{"ts":"2026-12-04T15:40:01Z","level":"info","msg":"rotated S3cretPw-2 in the vault"}\n'
    )
    source = file_source(tmp_path, "jsonl", ["app.jsonl"], now=NOW)
    found = search(source, '-"S3cretPw"', 60)
    assert [r.message for r in found.records] == ["login with password=***"]
    assert search(source, '"S3cretPw"', 60).match_count == 1


def test_the_names_seen_are_kept_bounded() -> None:
    from workers.sources.logs import secret_names

    fields: dict[str, object] = {"x" * 300_000 + "_password": "S3cret", "k" * 300: "v"}
    for i in range(5_000):
        fields[f"name_{i}"] = i
    mask_fields(fields)  # type: ignore[arg-type]
    assert fields["x" * 300_000 + "_password"] == "***"
    assert len(secret_names.NAMES) <= 4096
    assert all(len(name) <= 200 for name in secret_names.NAMES)


@pytest.mark.parametrize(
    ("query", "first"),
    [("", False), ("timeout", True), ("level:ERROR http_status:>=500", True),
     ("-health", False), ("GET -health", False), ('"password=***"', False)],
)  # fmt: skip
def test_a_record_is_tried_unmasked_first_only_where_masking_cannot_add_a_match(
    query: str, first: bool
) -> None:
    from workers.sources.logs.records import unmasked_first
    from workers.sources.logs.source import parse_log_query

    assert unmasked_first(parse_log_query(query)) is first


async def test_clickhouse_a_body_cut_inside_a_url_password_shows_no_head_of_it() -> None:
    # The server cuts a huge Body to max_line_bytes before masking: a URL cut between its
    # password and the `@` looked like no password at all, and its head was shown.
    head = "x" * 60 + " retrying postgres://app:"
    table = make_table([row(100, "INFO", "api", head + "S3cretPw-77@db/x and more")])
    found = await fetch(source_for(table, "[scan]\nmax_line_bytes = 90\n"), "retrying")
    shown = _shown(found)
    assert found.match_count == 1 and "S3cret" not in shown and "postgres://app:***" in shown


def test_file_a_secret_in_a_records_level_or_service_is_masked(tmp_path: Path) -> None:
    # Masking took the message and the fields: a level that is no known word is shown as it
    # is (upper-cased), and the service as the record names it.
    at = '{"ts":"2026-12-04T15:58:20Z","msg":"hi",'
    (tmp_path / "app.log").write_text(
        at + '"level":"password=S3cretPw-61","service":"api"}\n'
        + at + '"level":"info","service":"postgres://app:S3cretPw-62@db/x"}\n'
    )  # fmt: skip
    found = search(file_source(tmp_path, "jsonl", ["app.log"], now=NOW), "hi", 60)
    shown = _shown(found).lower()
    assert found.match_count == 2 and "s3cret" not in shown
    assert "postgres://app:***@db/x" in shown


def _docker(text: str, second: int) -> str:
    return msgspec.json.encode(
        {"log": text + "\n", "stream": "stdout", "time": f"2026-12-04T15:40:{second:02}Z"}
    ).decode()


@pytest.mark.parametrize("query", ["", "MIIEpAIB", "key"])
def test_a_private_key_printed_line_by_line_shows_no_line_of_its_body(
    tmp_path: Path, query: str
) -> None:
    # An app that prints a generated key to stdout: Docker (as the kubelet, syslog, journald)
    # makes each of its lines a record of its own, so no record held the key's opening line.
    lines = ["generated a key:", "-----BEGIN RSA PRIVATE KEY-----", PEM_BODY, PEM_BODY[::-1],
             "-----END RSA PRIVATE KEY-----", "key done"]  # fmt: skip
    (tmp_path / "c-json.log").write_text(
        "".join(_docker(text, n) + "\n" for n, text in enumerate(lines))
    )
    found = search(file_source(tmp_path, "docker", ["c-json.log"], now=NOW), query, 60)
    shown = _shown(found)
    assert PEM_BODY not in shown and PEM_BODY[::-1] not in shown
    assert query != "" or found.match_count == 6


@pytest.mark.parametrize("guess", ['"S3cretPw-55"', "S3cretPw", "S3cretPx"])
def test_file_a_guess_at_a_secret_in_a_line_not_in_the_format_tells_nothing(
    tmp_path: Path, guess: str
) -> None:
    # The prefilter passed the one line that is no JSON for a guess its secret holds: that
    # line alone was parsed, failed, and the file was "not in the configured format" (ERROR)
    # for a right guess, NO_EVIDENCE for a wrong one: an oracle, one character at a time.
    record = '{"ts":"2026-12-04T15:58:20Z","level":"info","msg":"hi","service":"api"}\n'
    (tmp_path / "a.log").write_text(record * 3 + "starting with password=S3cretPw-55 now\n")
    found = search(file_source(tmp_path, "jsonl", ["a.log"], now=NOW), guess, 60)
    assert found.match_count == 0 and not found.notes


def test_file_a_word_only_a_line_not_in_the_format_holds_is_no_format_error(
    tmp_path: Path,
) -> None:
    # The prefilter skipped every JSON line and passed the one that is none: the file, jsonl
    # three lines out of four, was "not in the configured format" (ERROR). It is in its
    # format. The line is timed by the record before it (as with the prefilter off, since
    # 2026-12-05; before, by the file's last write): records an hour before the window, no
    # match; records in the window, the line is found.
    for stamp, count in (("14:58:20", 0), ("15:58:20", 1)):
        record = f'{{"ts":"2026-12-04T{stamp}Z","level":"info","msg":"hi","service":"api"}}\n'
        (tmp_path / "a.log").write_text(record * 3 + "starting now\n")
        found = search(file_source(tmp_path, "jsonl", ["a.log"], now=NOW), "starting", 60)
        status = EvidenceStatus.EVIDENCE_FOUND if count else EvidenceStatus.NO_EVIDENCE
        assert found.match_count == count and project(found).evidence_status is status

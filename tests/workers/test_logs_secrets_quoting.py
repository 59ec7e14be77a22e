"""Secrets known by their shape, written the ways a shell, JSON and a terminal write them
(docs/logs.md, "Secrets"): a flag's or a client's value quoted with spaces, escaped as JSON
escapes it (`\\"a b\\"`) or with a backslash (`a\\ b`), curl's `user:password` quoted
whole or in part, and the terminal's control sequences other than colour (`ESC[K`, `ESC(B`,
OSC titles) that would hide a secret's name; masked alike on FILE, CLICKHOUSE and MOCK."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from logs_helpers import cpu_seconds, file_source, search
from test_logs_clickhouse import fetch, make_table, row, source_for
from test_logs_secrets_cli import NOW, _messages, _shown

from workers.sources.logs.masking import without_log_secrets
from workers.sources.logs.mocklog.index import _masked
from workers.sources.logs.mocklog.world import MockRecord

# (text, the text masked): every one holds `S3c` only in its secret
LEAKS = [
    # JSON inside a message or a Body (a command logged as a JSON string)
    ('{"cmd":"mysql --password=\\"S3c ret\\" db"}', '{"cmd":"mysql --password=\\"***\\" db"}'),
    ('{"cmd":"mysql -p\\"S3c ret\\" db"}', '{"cmd":"mysql -p*** db"}'),
    ('{"cmd":"redis-cli -a \\"S3c ret\\" ping"}', '{"cmd":"redis-cli -a *** ping"}'),
    # a shell's escapes
    ("backup --password S3c\\ ret -v", "backup --password *** -v"),
    ("vault --encryption-key /S3cretAbC+dEf/GhIjKlMnOpQrStUv", "vault --encryption-key ***"),
    ("run --password /etc/S3cret.txt", "run --password ***"),  # a password's flag: whatever
    ('backup --password "S3c \\" ret" -v', 'backup --password "***" -v'),
    ("mysql -uroot -pS3c\\ ret shop", "mysql -uroot -p*** shop"),
    # curl's user:password quoted with a space, whole or in part
    ('curl -u "alice:S3c ret" https://x', 'curl -u "alice:***" https://x'),
    ("curl --user 'alice:S3c ret' https://x", "curl --user 'alice:***' https://x"),
    ("curl -u alice:'S3c ret' https://x", "curl -u alice:*** https://x"),
    (
        '{"cmd":"curl -u \\"alice:S3c ret\\" https://x"}',
        '{"cmd":"curl -u \\"alice:***\\" https://x"}',
    ),
    ("curl -u alice:S3c\\ ret https://x", "curl -u alice:*** https://x"),
    # docker's and podman's login: `-p` is the password
    ("docker login -u ci -p S3cret ghcr.io", "docker login -u ci -p *** ghcr.io"),
    ('sshpass -P "assword:" -p S3cret ssh h', 'sshpass -P "assword:" -p *** ssh h'),
    ("podman login -pS3cret quay.io", "podman login -p*** quay.io"),
    # MongoDB's shells and tools, sqlcmd: `-p`, `-P` is the password
    ("mongosh -u app -p S3cret --port 27017", "mongosh -u app -p *** --port 27017"),
    ("mongodump -u app -pS3cret --db shop", "mongodump -u app -p*** --db shop"),
    ("sqlcmd -S db -U sa -P S3cret -Q 'select 1'", "sqlcmd -S db -U sa -P *** -Q 'select 1'"),
    # a command line logged as a list of its words (Python's CalledProcessError, a JSON argv)
    (
        "Command '['mysql', '-uroot', '-pS3cret', 'shop']' returned non-zero exit status 1.",
        "Command '['mysql', '-uroot', '-p***', 'shop']' returned non-zero exit status 1.",
    ),
    (
        "run ['mysqldump', '--password', 'S3cret', 'shop']",
        "run ['mysqldump', '--password', '***', 'shop']",
    ),
    ('argv=["backup","--token","S3cret","-v"]', 'argv=["backup","--token","***","-v"]'),
    ("['curl', '-u', 'alice:S3cret', 'https://x']", "['curl', '-u', 'alice:***', 'https://x']"),
    ('["redis-cli","-a","S3cret","ping"]', '["redis-cli","-a","***","ping"]'),
    (
        "['sshpass', '-p', 'S3cret', 'ssh', '-p', '2222', 'h']",
        "['sshpass', '-p', '***', 'ssh', '-p', '2222', 'h']",
    ),
    ('ARGS="--password S3cret -v"', 'ARGS="--password *** -v"'),
    # an HTTP credential under a scheme other than Bearer/Basic, a header as a pair of words
    ("Authorization: ApiKey k3yS3cret9 sent", "Authorization: *** *** sent"),
    ("authorization=SSWS 00S3cretOkta", "authorization=*** ***"),
    (
        '[["Authorization","Bearer S3cret9"],["Cookie","sid=S3cret9"]]',
        '[["Authorization","Bearer ***"],["Cookie","***"]]',
    ),
    (
        "scope headers [(b'host', b'x'), (b'cookie', b'sid=S3cret9; theme=dark')]",
        "scope headers [(b'host', b'x'), (b'cookie', b'***')]",
    ),
    (
        "[('X-Api-Key', 'S3cretK3y'), ('Accept', '*/*')]",
        "[('X-Api-Key', '***'), ('Accept', '*/*')]",
    ),
    # percent-encoded in a URL's parameter (an OAuth redirect): after `%3D`, `%20`
    (
        "GET /cb?next=https%3A%2F%2Fapp%2Fx%3Fgh%3Dghp_16C7e42F292c6912E7710c838347Ae17S3c HTTP/1.1",
        "GET /cb?next=https%3A%2F%2Fapp%2Fx%3Fgh%3Dghp_*** HTTP/1.1",
    ),
    (
        "GET /r?next=%2Freset%3Fpassword%3DS3cret%26u%3D1 HTTP/1.1",
        "GET /r?next=%2Freset%3Fpassword%3D*** HTTP/1.1",
    ),
    ("q=Bearer%20eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.S3cSig", "q=Bearer%20***"),
    ("GET /r?next=%2Fx%3Fapi_key%3DS3cret HTTP/1.1", "GET /r?next=%2Fx%3Fapi_key%3D*** HTTP/1.1"),
    # terminal sequences other than colour
    ("password\x1b[K=S3cret ok", "password=*** ok"),
    ("pass\x1b[?25lword=S3cret ok", "password=*** ok"),
    ("password\x1b(B\x1b[m=S3cret ok", "password=*** ok"),  # `tput sgr0`
    ("password\x1b]0;build\x07=S3cret ok", "password=*** ok"),
    ("token\x1b]8;;https://x\x1b\\=S3cret ok", "token=*** ok"),  # a hyperlink, ST-ended
    # Erlang terms in RabbitMQ's crash reports (rabbitmq-server issues 1837, 3210, 3803)
    (
        '{amqp_params_network,<<"shovel">>,<<"S3cretPw1">>,<<"/">>,"host-1",5672}',
        '{amqp_params_network,<<"shovel">>,<<"***">>,<<"/">>,"host-1",5672}',
    ),
    (
        'amqp_params_network,<<"user1">>,\n        <<"S3cretPw1">>,<<"/">>,',
        'amqp_params_network,<<"user1">>,\n        <<"***">>,<<"/">>,',
    ),
    (
        '{keyfile,"/etc/rabbitmq/key.pem"},{password,"S3cretabcdefgh"},{verify,verify_peer}',
        '{keyfile,"/etc/rabbitmq/key.pem"},{password,"***"},{verify,verify_peer}',
    ),
    (
        '[{default_pass,<<"S3cretPw1">>},{default_user,<<"guest">>}]',
        '[{default_pass,<<"***">>},{default_user,<<"guest">>}]',
    ),
    ('{<<"password">>,<<"S3cretPw1">>}', '{<<"password">>,<<"***">>}'),
    ("{password, 'S3cretPw1'}", "{password, '***'}"),
    # an authority with a password and no scheme, a word of its own: an Envoy line not in
    # the format (matched as text), a Host header, a connection string
    (
        '[x] "GET / HTTP/1.1" 200 "admin:S3cretPw1@api.local" "10.0.0.2:80"',
        '[x] "GET / HTTP/1.1" 200 "admin:***@api.local" "10.0.0.2:80"',
    ),
    ("connecting as app:S3cretPw1@db-1:5432 failed", "connecting as app:***@db-1:5432 failed"),
    ("host=admin:S3cretPw1@10.0.0.5", "host=admin:***@10.0.0.5"),
]

KEPT = [
    # `--password-stdin` reads it from stdin: the word after it is the registry
    "echo $T | docker login -u ci --password-stdin ghcr.io",
    "docker run -p 8080:80 web",
    "Command '['mysql', '-uroot', '-p', 'shop']' returned non-zero exit status 1.",
    "['ssh', '-p', '2222', 'web-1']",
    "['sshpass', '-f', '/run/pw', 'ssh', '-p', '2222', 'h']",
    'opts=["--password-file","/run/pw"]',
    "authorization: denied user=42 path=/admin",  # prose, then a name's value
    "authorization: policy v2 applied to 3 users",  # a short word: no credential
    # a key's flag naming its file: which key, no secret (a key itself holds no `.`)
    "mysql --ssl-key=/etc/mysql/client-key.pem --ssl-cert=/etc/mysql/client-cert.pem",
    "server --tls-key ./certs/tls.key --port 8443",
    'Authorization: Digest username="alice", realm="api"',  # Digest: no secret of its own
    "redacted fields: ['password', 'username']",  # a list of names, no header
    '[["Cookie-Policy","strict"]]',
    "docker login ghcr.io",
    "mongosh -u app -p --port 27017",  # `-p` alone prompts
    "sqlcmd -S db -p -Q 'select 1'",  # sqlcmd's `-p` prints statistics
    "a lone ESC \x1b] with no end stays",
    '{token,"expired"},{verify,verify_peer},{password,""}',  # prose, an atom, nothing
    # an address, a SIP or mail URI, an image's digest, a git remote, an Erlang node
    "mail to mailto:bob@example.com or sip:alice@atlanta.example.com",
    "pulled nginx:1.25@sha256:0123abcd from git@github.com:org/repo.git on rabbit@node-1",
]


@pytest.mark.parametrize(("text", "masked"), LEAKS)
def test_a_quoted_escaped_or_hidden_secret_is_masked(text: str, masked: str) -> None:
    assert without_log_secrets(text) == masked


@pytest.mark.parametrize("text", KEPT)
def test_evidence_beside_them_is_kept(text: str) -> None:
    assert without_log_secrets(text) == text


def test_a_hex_digest_beside_an_aws_key_id_is_kept_its_secret_key_masked() -> None:
    # 40 hex digits of one case beside an AWS key id: a git commit or a SHA-1, no secret key
    # (mixed case, `/` or `+`: the key)
    sha = "3f613d524fcce91419ffde671ab907c1c1a99aea"
    assert (
        without_log_secrets(f"AKIAIOSFODNN7EXAMPLE in commit {sha}") == f"AKIA*** in commit {sha}"
    )
    upper = "DA39A3EE5E6B4B0D3255BFEF95601890AFD80709"
    assert without_log_secrets(f"AKIAIOSFODNN7EXAMPLE sha1 {upper}") == f"AKIA*** sha1 {upper}"
    text = "AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    assert without_log_secrets(text) == "AKIA*** ***"
    assert without_log_secrets("AKIAIOSFODNN7EXAMPLE " + "aB12" * 10) == "AKIA*** ***"


def test_file_masks_them_in_every_record(tmp_path: Path) -> None:
    lines = [
        json.dumps({"ts": f"2026-12-04T15:40:{n:02}Z", "level": "info", "msg": t}) + "\n"
        for n, (t, _) in enumerate(LEAKS)
    ]
    (tmp_path / "app.jsonl").write_text("".join(lines))
    found = search(file_source(tmp_path, "jsonl", ["app.jsonl"], now=NOW), "", 60)
    assert _messages(found) == {m for _, m in LEAKS}
    assert "S3c" not in _shown(found)


def test_file_a_plain_line_with_a_terminal_sequence_is_masked_and_found(tmp_path: Path) -> None:
    # FILE strips the sequences from the file's bytes as it strips colour: the line is found
    # by the text it shows
    (tmp_path / "app.log").write_text(
        "2026-12-04T15:40:00Z INFO password\x1b[K=S3cretPw ok\n"
        "2026-12-04T15:40:01Z INFO build\x1b]0;title\x07 done\n"
    )
    found = search(file_source(tmp_path, "plain", ["app.log"], now=NOW), '"password=***"', 60)
    assert found.match_count == 1 and "S3cret" not in _shown(found)
    found = search(file_source(tmp_path, "plain", ["app.log"], now=NOW), '"build done"', 60)
    assert found.match_count == 1


async def test_clickhouse_masks_them_in_body_and_attributes() -> None:
    rows = [row(100 - n, "INFO", "api", t, cmd=t) for n, (t, _) in enumerate(LEAKS)]
    found = await fetch(source_for(make_table(rows), "row_limit = 100\n"), "")
    assert found.match_count == len(LEAKS)
    assert _messages(found) == {m for _, m in LEAKS}
    assert {r.fields["cmd"] for r in found.records} == {m for _, m in LEAKS}
    assert "S3c" not in _shown(found)


@pytest.mark.parametrize(("text", "masked"), LEAKS)
def test_mock_masks_them_as_the_others(text: str, masked: str) -> None:
    record = MockRecord(
        epoch_ms=0, timestamp="", level="INFO", service="api", message=text, fields={"cmd": text}
    )
    assert _masked(record).message == masked and _masked(record).fields == {"cmd": masked}


@pytest.mark.parametrize(
    ("unit", "count"),
    [
        ("\x1b]", 300_000), ("\x1b]0;" + "a" * 60, 15_000), ("\x1b]0;" + "a" * 5000, 200), ("\x1b[?", 300_000),
        ("--password \\\"", 70_000), ("curl -u \"a:", 90_000), ("curl -u \\\"a:", 80_000),
        ("docker login -p ", 60_000), ("--password a\\ ", 70_000),
        ("mysql '-p', '", 70_000), ("'--password', '", 60_000), ("curl '-u', '", 80_000),
        ('redis-cli "-a","', 60_000), ("mongo '-p', '-p', ", 50_000),
        ('"Cookie","', 100_000), ("(b'cookie', b'", 70_000), ('"X-Api-Key","x",', 60_000),
        ("authorization: apikey ", 45_000), ("password%3D", 90_000),
        ("sshpass '-f', 'x', ", 60_000), ("%3Dghp_", 140_000),
        ("x%3DeyJabcdefghij.", 50_000), ("authorization: x " + "a=" * 30, 15_000),
        ('{password,"', 100_000), ("{password,'", 100_000), ('{<<"password">>,<<"', 50_000),
        ('amqp_params_network,<<"u">>,<<"', 30_000), ("{a,", 300_000),
        ("a:b@", 250_000), (" a:b@c", 150_000), ("a:" + "b" * 200 + "@", 5_000), ("a" * 300 + ":@", 3_000),
    ],
)  # fmt: skip
def test_the_new_rules_are_linear_on_a_1mb_line(unit: str, count: int) -> None:
    def seconds(line: str) -> float:
        return cpu_seconds(lambda: without_log_secrets(line))

    quarter, whole = seconds(unit * (count // 4)), seconds(unit * count)
    assert whole < 8 * quarter + 0.3, (quarter, whole)


def test_a_prose_word_under_a_secrets_name_shows_up_to_16_letters() -> None:
    # docs/logs.md, "Its costs": a lowercase token of up to 16 letters under `token=` shows
    assert without_log_secrets("token=expired") == "token=expired"
    assert without_log_secrets("token=abcdefghijklmnop") == "token=abcdefghijklmnop"
    assert without_log_secrets("token=abcdefghijklmnopq") == "token=***"


def test_a_key_file_under_a_keys_name_is_kept_in_a_message_and_a_field() -> None:
    from workers.sources.logs.masking import mask_fields

    assert without_log_secrets("ssl_key=/etc/ssl/client-key.pem ok") == (
        "ssl_key=/etc/ssl/client-key.pem ok"
    )
    fields: dict[str, object] = {"ssl_key": "/etc/ssl/client-key.pem", "api_key": "/S3cAbC+d/e"}
    mask_fields(fields)  # type: ignore[arg-type]
    assert fields == {"ssl_key": "/etc/ssl/client-key.pem", "api_key": "***"}


def test_an_unended_osc_takes_no_line_with_it(tmp_path: Path) -> None:
    # an OSC runs to BEL or ST on its own line only: one left open (a cut title) does not
    # swallow the lines up to a later BEL
    (tmp_path / "app.log").write_text(
        "2026-12-04T15:40:00Z INFO build \x1b]0;title cut\n"
        "2026-12-04T15:40:01Z ERROR disk full on web-1\n"
        "2026-12-04T15:40:02Z INFO bell \x07 rang\n"
    )
    found = search(file_source(tmp_path, "plain", ["app.log"], now=NOW), "", 60)
    assert found.match_count == 3 and "disk full on web-1" in _shown(found)
    assert without_log_secrets("a \x1b]0;t\nline two\x07 x") == "a \x1b]0;t\nline two\x07 x"
    from workers.sources.logs.files import without_colour  # a chunk of a file's bytes

    assert without_colour(b"a \x1b]0;t\nline two\x07 x\n") == b"a \x1b]0;t\nline two\x07 x\n"


async def test_clickhouse_a_phrase_split_by_a_colour_code_is_found_as_shown() -> None:
    # FILE finds it (test_logs_secrets_cli); CLICKHOUSE showed the Body without the codes but
    # its WHERE read the codes: the phrase it showed was not found
    table = make_table([row(10, "INFO", "api", "login \x1b[1merror\x1b[0m occurred")])
    found = await fetch(source_for(table), '"error occurred"')
    assert found.match_count == 1


# (message, a field's value): what a program wrote, codes and zero-width characters included
HIDDEN = [
    ("login \x1b[1merror\x1b[0m occurred", "plain"),
    ("disk\u200b full on web-1", "plain"),
    ("listening on port \x1b[1m80\x1b[0m80", "plain"),
    ("title \x1b]0;build 7\x07set", "plain"),
    # a hyperlink's OSC of over 1,024 characters: taken out by CLICKHOUSE, not by FILE, which
    # found a word of its URL and showed the escape sequence (CLICKHOUSE found nothing)
    ("link \x1b]8;;https://docs.example/" + "y" * 1100 + "zzpath\x07here", "plain"),
    ("charge declined", "\x1b[31mpayment\ufeff failed\x1b[0m"),
    ("nothing hidden here", "plain"),
]
# (query, the messages found): as shown, on every backend
HIDDEN_QUERIES = [
    ('"error occurred"', {"login error occurred"}),
    ('"disk full"', {"disk full on web-1"}),
    ("80", set()),  # shown `8080`: a number boundary, not `80` before a code
    ('"port 8080"', {"listening on port 8080"}),
    ('"title set"', {"title set"}),
    ("build", set()),  # a terminal's title is not shown
    ("zzpath", set()),  # nor a hyperlink's address, however long
    ('"link here"', {"link here"}),
    ('"payment failed"', {"charge declined"}),
    ('exception:"payment failed"', {"charge declined"}),
    ('-"error occurred" -"disk full" -plain', {"charge declined"}),
    ("1merror", set()),
]


@pytest.mark.parametrize(("query", "messages"), HIDDEN_QUERIES)
async def test_the_shown_text_is_matched_alike_on_file_and_clickhouse(
    tmp_path: Path, query: str, messages: set[str]
) -> None:
    # the same lines give the same answer: FILE reads a jsonl of them, CLICKHOUSE rows of them
    lines = [
        {"ts": "2026-12-04T15:40:00Z", "level": "INFO", "msg": m, "exception": n} for m, n in HIDDEN
    ]
    (tmp_path / "app.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    on_file = search(file_source(tmp_path, "jsonl", ["app.jsonl"], now=NOW), query, 60)
    table = make_table([row(10, "INFO", "api", m, exception=n) for m, n in HIDDEN])
    on_clickhouse = await fetch(source_for(table), query)
    for found in (on_file, on_clickhouse):
        assert _messages(found) == messages, found.source_kind
        assert found.match_count == len(messages), found.source_kind


@pytest.mark.parametrize(
    ("query", "count"),
    [("service:payments", 1), ("payments", 1), ("service:pay", 1), ("level:ERROR", 1)],
)
async def test_a_service_name_with_hidden_text_is_matched_as_shown_on_both(
    tmp_path: Path, query: str, count: int
) -> None:
    # a service's name holding a colour code and a zero-width character is shown `payments` on
    # both; CLICKHOUSE matched it as shown, FILE looked at a hidden character in the message
    # and the fields only: `service:payments` and `payments` found nothing there
    service, level = "\x1b[32mpay\u200bments\x1b[0m", "\x1b[31mERROR\x1b[0m"
    line = {"ts": "2026-12-04T15:40:00Z", "level": level, "service": service, "msg": "charge"}
    (tmp_path / "app.jsonl").write_text(json.dumps(line) + "\n")
    on_file = search(file_source(tmp_path, "jsonl", ["app.jsonl"], now=NOW), query, 60)
    on_clickhouse = await fetch(source_for(make_table([row(10, level, service, "charge")])), query)
    for found in (on_file, on_clickhouse):
        assert found.match_count == count, found.source_kind
        assert [r.service for r in found.records] == ["payments"] * count

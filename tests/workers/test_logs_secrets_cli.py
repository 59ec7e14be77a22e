"""Secrets in command lines, headers and tokens known by their shape (docs/logs.md, "Secrets"):
masked alike on FILE, CLICKHOUSE and MOCK (`masking.without_log_secrets`), colour codes and
partial lines notwithstanding; the evidence that only looks like them kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from logs_helpers import cpu_seconds, file_source, search
from logs_helpers import jsonl_of as _jsonl
from logs_helpers import messages_of as _messages
from logs_helpers import shown_of as _shown
from test_logs_clickhouse import fetch, make_table, row, source_for

from workers.sources.logs.masking import mask_fields, without_log_secrets
from workers.sources.logs.mocklog.index import _masked
from workers.sources.logs.mocklog.world import MockRecord

NOW = 1_796_400_000.0  # 2026-12-04T16:00:00Z
GHP = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
PAT = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123"
GLPAT = "glpat-S3cretZq8xYw7VuT6sR5"
XOXB = "xoxb-123456789012-1234567890123-S3cretAbCdEfGhIjKlMnOp"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sIg-77S3cretSig"
AWS_ID = "AKIAIOSFODNN7S3CRET1"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYS3cret1KEY"

# (text, the text masked): every one holds `S3cret` (or `S3CRET`) in its secret only
LEAKS = [
    ("mysqldump --password S3cretPw1 shop", "mysqldump --password *** shop"),
    ("mysqldump --password=S3cretPw1 shop", "mysqldump --password=*** shop"),
    ("backup.sh --db-password S3cretPw1 -v", "backup.sh --db-password *** -v"),
    ("cli --token abcS3cret --verbose", "cli --token *** --verbose"),
    ("cli --token=abc --verbose", "cli --token=*** --verbose"),  # a word, but a flag's value
    ("deploy -password 'S3cret Pw' -v", "deploy -password '***' -v"),
    ("mysql -uroot -pS3cretPw1 shop", "mysql -uroot -p*** shop"),
    (
        "/usr/bin/mysqldump -h db -uroot -pS3cretPw1 --all",
        "/usr/bin/mysqldump -h db -uroot -p*** --all",
    ),
    ("mariadb -pS3cretPw1 -e 'select 1'", "mariadb -p*** -e 'select 1'"),
    ("sshpass -p S3cretPw1 ssh deploy@web-1", "sshpass -p *** ssh deploy@web-1"),
    ("sshpass -pS3cretPw1 scp a b", "sshpass -p*** scp a b"),
    ("sshpass -f pw -p S3cretPw1 ssh -p 2222 h", "sshpass -f pw -p *** ssh -p 2222 h"),
    ('{"cmd":"mysqladmin -h db -P 3306 -pS3cretPw1"}', '{"cmd":"mysqladmin -h db -P 3306 -p***"}'),
    ("curl -u 'alice:S3cretPw1' https://x", "curl -u 'alice:***' https://x"),
    ("redis-cli --pass S3cretPw1 -n 2", "redis-cli --pass *** -n 2"),
    (f"AWS_ACCESS_KEY_ID={AWS_ID} set", "AWS_ACCESS_KEY_ID=AKIA*** set"),
    (f"git clone https://{GHP}@github.com/o/r", "git clone https://ghp_***@github.com/o/r"),
    ("curl -u alice:S3cretPw1 https://api/x", "curl -u alice:*** https://api/x"),
    ("curl -s --user alice:S3cretPw1 https://api/x", "curl -s --user alice:*** https://api/x"),
    ("redis-cli -h cache -a S3cretPw1 ping", "redis-cli -h cache -a *** ping"),
    ("PGPASSWORD=S3cretPw1 psql -h db", "PGPASSWORD=*** psql -h db"),
    ("export AWS_SECRET_ACCESS_KEY=S3cret/Pw1+x", "export AWS_SECRET_ACCESS_KEY=***"),
    ("X-Auth-Token: tokS3cret91 sent", "X-Auth-Token: *** sent"),
    ("X-Vault-Token: hvs.CAESIS3cret91", "X-Vault-Token: ***"),
    (f"using {AWS_ID} {AWS_SECRET} now", "using AKIA*** *** now"),
    (f"creds {AWS_ID}:{AWS_SECRET}", "creds AKIA***:***"),
    (f"push with {GHP} failed", "push with ghp_*** failed"),
    (f"token {PAT}", "token github_pat_***"),
    (f"clone https://{GLPAT}@gitlab/x failed", "clone https://glpat-***@gitlab/x failed"),
    (f"slack {XOXB} posted", "slack xoxb-*** posted"),
    (f"id_hint {JWT} from idp", "id_hint *** from idp"),
    (f'{{"jwt_claims":"x","raw":"{JWT}"}}', '{"jwt_claims":"x","raw":"***"}'),
]

KEPT = [
    "token_count=512 max_tokens=4096",
    "password reset requested for user 42",
    "nc -l -p 8080 web-1",
    "ssh -p 2222 deploy@web-1",
    "mysql --port 3306 -h db -P 3306 shop",
    "mysql -u root -p shop",  # `-p` alone prompts: `shop` is the database
    "curl -u alice https://api/x",  # no password: curl prompts
    "docker run -p 8080:80 web",
    "commit 0123456789abcdef0123456789abcdef01234567 pushed",
    "zone Asia/Tokyo ghp_short xoxo-gossip glpat-",
    "key_id=AKIAEXAMPLE eyJ-not-a-jwt",
    "use the --token-file flag and --password-file",
]


@pytest.mark.parametrize(("text", "masked"), LEAKS)
def test_a_secret_of_a_command_header_or_token_is_masked(text: str, masked: str) -> None:
    assert without_log_secrets(text) == masked


@pytest.mark.parametrize("text", KEPT)
def test_evidence_that_looks_like_a_command_secret_is_kept(text: str) -> None:
    assert without_log_secrets(text) == text


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("password\x1b[0m=S3cretPw1 ok", "password=*** ok"),
        ("\x1b[31mERROR\x1b[0m login token=\x1b[1mS3cretTok9\x1b[0m", "ERROR login token=***"),
        ("mysql -uroot -p\x1b[33mS3cretPw1\x1b[0m", "mysql -uroot -p***"),
    ],
)
def test_colour_codes_do_not_defeat_masking(text: str, masked: str) -> None:
    assert without_log_secrets(text) == masked


CASES = [*LEAKS, ("password\x1b[0m=S3cretPw1 ok", "password=*** ok")]


def test_file_masks_them_in_every_record(tmp_path: Path) -> None:
    (tmp_path / "app.jsonl").write_text(_jsonl([t for t, _ in CASES]))
    found = search(file_source(tmp_path, "jsonl", ["app.jsonl"], now=NOW), "", 60)
    assert _messages(found) == {m for _, m in CASES}
    assert "S3cret" not in _shown(found) and "S3CRET" not in _shown(found)


async def test_clickhouse_masks_them_in_body_and_attributes() -> None:
    rows = [row(100 - n, "INFO", "api", t, cmd=t) for n, (t, _) in enumerate(CASES)]
    found = await fetch(source_for(make_table(rows), "row_limit = 100\n"), "")
    assert found.match_count == len(CASES)
    assert _messages(found) == {m for _, m in CASES}
    assert {r.fields["cmd"] for r in found.records} == {m for _, m in CASES}
    assert "S3cret" not in _shown(found) and "S3CRET" not in _shown(found)


@pytest.mark.parametrize(("text", "masked"), CASES)
def test_mock_masks_them_as_the_others(text: str, masked: str) -> None:
    record = MockRecord(
        epoch_ms=0, timestamp="", level="INFO", service="api", message=text, fields={"cmd": text}
    )
    assert _masked(record).message == masked and _masked(record).fields == {"cmd": masked}
    fields: dict[str, object] = {"note": text}
    mask_fields(fields)  # type: ignore[arg-type]
    assert fields == {"note": masked}


async def test_clickhouse_a_guess_matching_only_a_coloured_secret_finds_nothing() -> None:
    table = make_table([row(10, "INFO", "api", "login password\x1b[0m=S3cretPw-7 ok")])
    found = await fetch(source_for(table), '"S3cretPw"')
    assert found.match_count == 0 and not found.records
    found = await fetch(source_for(table), "login")
    assert _messages(found) == {"login password=*** ok"}


def _docker(text: str, second: int, *, whole: bool = True) -> str:
    log = text + ("\n" if whole else "")
    return json.dumps({"log": log, "stream": "stdout", "time": f"2026-12-04T15:40:{second:02}Z"})


def test_docker_partial_lines_are_joined_before_masking(tmp_path: Path) -> None:
    # Docker cuts a long line into parts (`log` without its newline): a secret cut between
    # two parts is masked in the joined line; a coloured one (escaped in JSON) too
    lines = [
        _docker("connecting with passw", 0, whole=False),
        _docker("ord=S3cretPw-1 to db", 1),
        _docker("\x1b[32mmysql -uroot -pS3cret", 2, whole=False),
        _docker("Pw-2\x1b[0m shop", 3),
    ]
    (tmp_path / "c-json.log").write_text("\n".join(lines) + "\n")
    found = search(file_source(tmp_path, "docker", ["c-json.log"], now=NOW), "", 60)
    assert _messages(found) == {"connecting with password=*** to db", "mysql -uroot -p*** shop"}
    assert "S3cret" not in _shown(found)


def test_cri_partial_lines_are_joined_before_masking(tmp_path: Path) -> None:
    (tmp_path / "0.log").write_text(
        "2026-12-04T15:40:00.000000000Z stdout P sshpass -p S3c\n"
        "2026-12-04T15:40:00.100000000Z stdout P retPw-3 ssh \n"
        "2026-12-04T15:40:00.200000000Z stdout F web-1\n"
        f"2026-12-04T15:40:01.000000000Z stderr P push with {GHP[:10]}\n"
        f"2026-12-04T15:40:01.100000000Z stderr F {GHP[10:]} failed\n"
    )
    found = search(file_source(tmp_path, "cri", ["0.log"], now=NOW), "", 60)
    assert _messages(found) == {"sshpass -p *** ssh web-1", "push with ghp_*** failed"}
    assert "S3cret" not in _shown(found) and GHP[10:] not in _shown(found)


def test_a_stack_trace_is_masked_after_its_lines_are_joined(tmp_path: Path) -> None:
    (tmp_path / "app.log").write_text(
        "2026-12-04T15:40:00,000 ERROR [main] com.shop.Db - backup failed\n"
        "java.io.IOException: exit 2 from mysqldump --password\n"
        "    S3cretPw-4 --all-databases\n"
        "\tat com.shop.Db.run(Db.java:42)\n"
    )
    found = search(file_source(tmp_path, "log4j", ["app.log"], now=NOW), "backup", 60)
    assert found.match_count == 1 and "S3cret" not in _shown(found)


def test_file_a_phrase_split_by_an_escaped_colour_code_is_found_as_shown(tmp_path: Path) -> None:
    # JSON escapes a colour code (`\u001b[1m`): the record is shown without it, so a phrase
    # of the shown text finds it, though the record tried unmasked first held the code
    (tmp_path / "app.jsonl").write_text(_jsonl(["login \x1b[1merror\x1b[0m occurred", "other"]))
    found = search(file_source(tmp_path, "jsonl", ["app.jsonl"], now=NOW), '"error occurred"', 60)
    assert _messages(found) == {"login error occurred"}


@pytest.mark.parametrize(
    ("unit", "count"),
    [
        ("mysql -p", 120_000), ("mysql ", 150_000), ("sshpass -f x ", 70_000),
        ("curl -u a:", 100_000), ("--password ", 90_000), ("-token '", 120_000),
        ("eyJabcdefghij.", 60_000), ("ghp_", 250_000), ("AKIA", 250_000),
        ("AKIAIOSFODNN7EXAMPLE " + "a" * 40 + " ", 15_000), ("\x1b[0m", 200_000),
    ],
)  # fmt: skip
def test_the_shape_rules_are_linear_on_a_1mb_line(unit: str, count: int) -> None:
    def seconds(line: str) -> float:
        return cpu_seconds(lambda: without_log_secrets(line))

    quarter = seconds(unit * (count // 4))
    whole = seconds(unit * count)
    assert whole < 8 * quarter + 0.3, (quarter, whole)
    assert whole < 5.0


@pytest.mark.parametrize(
    ("secret", "opening"),
    [(GHP, "ghp_"), (JWT, ""), (AWS_ID, "AKIA"), (GLPAT, "glpat-"), (PAT, "github_pat_")],
)
async def test_clickhouse_a_body_cut_inside_a_token_shows_no_head_of_it(
    secret: str, opening: str
) -> None:
    # The server cuts a huge Body to max_line_bytes before masking: a token cut short is no
    # longer the token's shape (too short), and its head was shown.
    head = "x" * 60 + " pushing with "
    table = make_table([row(100, "INFO", "api", head + secret + " and more")])
    found = await fetch(source_for(table, "[scan]\nmax_line_bytes = 86\n"), "pushing")
    shown = _shown(found)
    assert found.match_count == 1 and secret[:12] not in shown  # the 12 the cut kept
    assert head + opening + "***" in shown  # a JWT whole


@pytest.mark.parametrize("unit", ["ghp_", "a", "eyJ.", "x AKIA"])
def test_the_cut_token_rule_is_linear_on_a_1mb_text(unit: str) -> None:
    from workers.sources.logs.tokens import without_cut_token

    def seconds(text: str) -> float:
        return cpu_seconds(lambda: without_cut_token(text), repeat=1)

    count = 1_000_000 // len(unit)
    quarter, whole = seconds(unit * (count // 4)), seconds(unit * count)
    assert whole < 8 * quarter + 0.3 and whole < 5.0, (quarter, whole)


@given(
    st.lists(
        st.sampled_from([GHP, PAT, GLPAT, XOXB, JWT, AWS_ID, AWS_SECRET, "ghp_", "eyJ", "AKIA",
                         "x", " ", ":", "=", ".", "-", "_", "0", "Z"]),
        max_size=8,
    ).map("".join)
)  # fmt: skip
def test_the_token_gate_never_hides_a_token(text: str) -> None:
    # the substring checks in front of the expression (`may_hold_token`, inlined in
    # `without_log_secrets`) pass every text the expression would change
    from workers.sources.logs.tokens import may_hold_token, without_tokens

    if without_tokens(text) != text:
        assert may_hold_token(text)
        assert without_log_secrets(text) != text

"""Adversarial corpus for `query_mysql`: (name, sql, params, expected outcome).

Expected outcome is "ok" (runs; EVIDENCE_FOUND or NO_EVIDENCE) or an ErrorCode name. Reusable by
pipeline-level tests: run each case against a shop copy and assert the outcome and that the
database is unchanged.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["CORPUS", "Case"]

Case = tuple[str, str, list[Any], str]
F, S, E, T = "FORBIDDEN_QUERY", "SCHEMA", "EXECUTION", "TIMEOUT"

CORPUS: Final[tuple[Case, ...]] = (
    # legitimate queries that must work
    ("simple", "SELECT id, status FROM orders WHERE id = ?", [100001], "ok"),
    (
        "like_percent",
        "SELECT COUNT(*) FROM refunds WHERE error_message LIKE 'connection%'",
        [],
        "ok",
    ),
    ("literal_semicolon", "SELECT 'a;b' AS s, id FROM orders WHERE id = ?", [100002], "ok"),
    ("literal_question", "SELECT '?' AS q, id FROM orders WHERE id = ?", [100003], "ok"),
    ("literal_escaped_quote", "SELECT 'it\\'s; DROP TABLE orders' AS s", [], "ok"),
    ("trailing_semicolon", "SELECT 1;", [], "ok"),
    ("dash_comment", "SELECT 1 -- a comment ?\n", [], "ok"),
    ("block_comment", "SELECT /* plain ; comment */ 1", [], "ok"),
    (
        "cte_window",
        "WITH t AS (SELECT user_id, total_amount FROM orders) SELECT user_id, "
        "SUM(total_amount) OVER (PARTITION BY user_id) FROM t LIMIT 5",
        [],
        "ok",
    ),
    (
        "union",
        "SELECT id FROM orders WHERE id = 100001 UNION ALL SELECT id FROM payments "
        "WHERE id = 500001",
        [],
        "ok",
    ),
    (
        "subquery",
        "SELECT * FROM customers WHERE id IN (SELECT user_id FROM orders "
        "WHERE tenant_id = ?) LIMIT 3",
        ["t-1042"],
        "ok",
    ),
    (
        "date_format_percent",
        "SELECT DATE_FORMAT(created_at, '%Y-%m-%d') d FROM orders LIMIT 1",
        [],
        "ok",
    ),
    ("no_rows", "SELECT * FROM orders WHERE id = ?", [-1], "ok"),
    ("explain", "EXPLAIN SELECT * FROM orders WHERE user_id = ? AND status = ?", [7, "PAID"], "ok"),
    ("describe", "DESCRIBE orders", [], "ok"),
    (
        "information_schema",
        "SELECT INDEX_NAME FROM information_schema.STATISTICS WHERE TABLE_NAME = 'orders'",
        [],
        "ok",
    ),
    ("null_decimal_date", "SELECT credit_limit, created_at FROM customers WHERE id = 7", [], "ok"),
    ("json_blob", "SELECT payload, attachment FROM order_events ORDER BY id LIMIT 3", [], "ok"),
    ("huge_result", "SELECT * FROM order_items", [], "ok"),
    ("wide_result", "SELECT REPEAT('x', 100000) AS big, o.* FROM orders o LIMIT 60", [], "ok"),
    ("explicit_big_limit", "SELECT id FROM order_items LIMIT 5000", [], "ok"),
    ("string_param_injection", "SELECT id FROM orders WHERE tenant_id = ?", ["x' OR '1'='1"], "ok"),
    ("param_percent", "SELECT id FROM orders WHERE tenant_id LIKE ?", ["t-10%"], "ok"),
    ("param_backslash", "SELECT ? AS v", ["a\\'; DROP TABLE orders; -- "], "ok"),
    ("null_bool_float_params", "SELECT ?, ?, ?", [None, True, 1.5], "ok"),
    # stacked statements
    ("stacked", "SELECT 1; DROP TABLE orders", [], F),
    ("stacked_commit", "SELECT 1; COMMIT; DELETE FROM orders", [], F),
    ("double_semicolon", "SELECT 1;;", [], F),
    ("backslash_break", "SELECT 'x\\\\'; DROP TABLE orders; -- '", [], F),
    # comment tricks
    ("minus_minus", "SELECT 1--1;DROP TABLE orders", [], F),
    ("hash_comment", "SELECT 1 # ; DROP TABLE orders", [], F),
    ("version_comment", "SELECT 1 /*!50000 ; DROP TABLE orders */", [], F),
    ("version_comment_bare", "/*! DROP TABLE orders */", [], F),
    ("mariadb_comment", "SELECT 1 /*M!100000 , SLEEP(5) */", [], F),
    ("hint", "SELECT /*+ MAX_EXECUTION_TIME(0) */ 1", [], F),
    ("nested_comment", "SELECT 1 /* a /* b */ ; DROP TABLE orders */", [], F),
    ("unterminated_comment", "SELECT 1 /* never closed", [], F),
    ("nbsp", "SELECT\u00a01", [], F),
    ("nul", "SELECT 1\x00; DROP TABLE orders", [], F),
    ("odbc_escape", "SELECT {fn NOW()}", [], F),
    # writes, DDL, DCL and other statements
    ("insert", "INSERT INTO orders (id) VALUES (1)", [], F),
    ("update", "UPDATE orders SET status = 'X'", [], F),
    ("delete", "DELETE FROM orders", [], F),
    ("replace", "REPLACE INTO customers (id) VALUES (1)", [], F),
    ("cte_update", "WITH x AS (SELECT 1) UPDATE orders SET status = 'X'", [], F),
    ("drop", "DROP TABLE orders", [], F),
    ("create_temp", "CREATE TEMPORARY TABLE t AS SELECT 1", [], F),
    ("truncate", "TRUNCATE TABLE orders", [], F),
    ("grant", "GRANT ALL ON *.* TO 'x'@'%'", [], F),
    ("set_password", "SET PASSWORD = PASSWORD('x')", [], F),
    ("set_var", "SET @a = 1", [], F),
    ("set_statement", "SET STATEMENT max_statement_time=0 FOR SELECT 1", [], F),
    ("call", "CALL p()", [], F),
    ("do", "DO SLEEP(5)", [], F),
    ("handler", "HANDLER orders OPEN", [], F),
    ("lock_tables", "LOCK TABLES orders READ", [], F),
    ("prepare", "PREPARE s FROM 'SELECT 1'", [], F),
    ("execute_immediate", "EXECUTE IMMEDIATE 'DROP TABLE orders'", [], F),
    ("kill", "KILL 1", [], F),
    ("use", "USE mysql", [], F),
    ("show_grants", "SHOW GRANTS", [], F),
    ("explain_analyze", "EXPLAIN ANALYZE SELECT 1", [], F),
    ("load_data", "LOAD DATA LOCAL INFILE '/etc/passwd' INTO TABLE orders", [], F),
    # INTO and locking reads
    ("into_var", "SELECT 1 INTO @x", [], F),
    ("into_outfile", "SELECT * FROM orders INTO OUTFILE '/tmp/o.txt'", [], F),
    ("into_dumpfile", "SELECT 'x' INTO DUMPFILE '/tmp/d'", [], F),
    ("for_update", "SELECT * FROM orders WHERE id = 100001 FOR UPDATE", [], F),
    ("share_mode", "SELECT * FROM orders LOCK IN SHARE MODE", [], F),
    ("for_share", "SELECT * FROM orders FOR SHARE", [], F),
    # variables
    ("user_var_assign", "SELECT @a := 1", [], F),
    ("user_var_read", "SELECT @a", [], F),
    ("system_var", "SELECT @@hostname", [], F),
    ("named_placeholder", "SELECT :x", [], F),
    # functions: DoS, locks, files, internals
    ("sleep", "SELECT SLEEP(5)", [], F),
    ("sleep_spaced", "SELECT sleep (5)", [], F),
    ("benchmark", "SELECT BENCHMARK(100000000, MD5('x'))", [], F),
    ("get_lock", "SELECT GET_LOCK('x', 0)", [], F),
    ("release_all_locks", "SELECT RELEASE_ALL_LOCKS()", [], F),
    ("load_file", "SELECT LOAD_FILE('/etc/passwd')", [], F),
    ("master_pos_wait", "SELECT MASTER_POS_WAIT('f', 1)", [], F),
    ("user_fn", "SELECT USER(), CURRENT_USER()", [], F),
    ("version_fn", "SELECT VERSION()", [], F),
    ("nextval", "SELECT NEXTVAL(s)", [], F),
    ("udf", "SELECT sys_eval('id')", [], F),
    # other schemas
    ("mysql_schema", "SELECT * FROM mysql.user", [], F),
    ("processlist", "SELECT * FROM information_schema.PROCESSLIST", [], F),
    ("perf_schema", "SELECT * FROM performance_schema.threads", [], F),
    # DoS only the time limit stops
    ("cross_join", "SELECT COUNT(*) FROM order_items a, order_items b, order_items c", [], T),
    # placeholders and params
    ("too_few_params", "SELECT ? + ?", [1], S),
    ("too_many_params", "SELECT ?", [1, 2], S),
    ("params_no_placeholder", "SELECT 1", [1], S),
    ("nan_param", "SELECT ?", [float("nan")], S),
    ("list_param", "SELECT ?", [[1, 2]], S),
    ("dict_param", "SELECT ?", [{"a": 1}], S),
    # server-side errors
    ("unknown_column", "SELECT nope FROM orders", [], E),
    ("unknown_table", "SELECT * FROM nope", [], E),
    ("division_warning", "SELECT 1 / 0", [], E),
    ("empty", "   ", [], F),
)

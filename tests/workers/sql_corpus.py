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
        "SELECT INDEX_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() "
        "AND TABLE_NAME = 'orders'",
        [],
        "ok",
    ),
    (
        "info_schema_own_tables",
        "SELECT TABLE_NAME, TABLE_ROWS FROM information_schema.TABLES "
        "WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME",
        [],
        "ok",
    ),
    (
        "info_schema_columns_of_table",
        "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS "
        "WHERE DATABASE() = TABLE_SCHEMA AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
        ["orders"],
        "ok",
    ),
    (
        "info_schema_join",
        "SELECT c.COLUMN_NAME, t.TABLE_TYPE FROM information_schema.TABLES t "
        "JOIN information_schema.COLUMNS c ON c.TABLE_NAME = t.TABLE_NAME "
        "WHERE t.TABLE_SCHEMA = DATABASE() AND c.TABLE_SCHEMA = SCHEMA() AND t.TABLE_NAME = 'orders'",
        [],
        "ok",
    ),
    (
        "builtin_functions",
        "SELECT UPPER(status), COUNT(*), IFNULL(NULL, 1), DATE_FORMAT(MAX(created_at), '%Y'), "
        "SUBSTRING(status, 1, 2), CAST(COUNT(*) AS CHAR) FROM orders GROUP BY status",
        [],
        "ok",
    ),
    ("bare_time_keywords", "SELECT CURRENT_TIMESTAMP, UTC_DATE, CURRENT_DATE", [], "ok"),
    ("comment_after_semicolon", "SELECT 1; -- done", [], "ok"),
    ("null_decimal_date", "SELECT credit_limit, created_at FROM customers WHERE id = 7", [], "ok"),
    ("json_blob", "SELECT payload, attachment FROM order_events ORDER BY id LIMIT 3", [], "ok"),
    ("huge_result", "SELECT * FROM order_items", [], "ok"),
    ("wide_result", "SELECT REPEAT('x', 100000) AS big, o.* FROM orders o LIMIT 60", [], "ok"),
    ("explicit_big_limit", "SELECT id FROM order_items LIMIT 5000", [], "ok"),
    ("string_param_injection", "SELECT id FROM orders WHERE tenant_id = ?", ["x' OR '1'='1"], "ok"),
    ("param_percent", "SELECT id FROM orders WHERE tenant_id LIKE ?", ["t-10%"], "ok"),
    ("param_backslash", "SELECT ? AS v", ["a\\'; DROP TABLE orders; -- "], "ok"),
    ("null_bool_float_params", "SELECT ?, ?, ?", [None, True, 1.5], "ok"),
    # JSON_TABLE as a FROM/JOIN source is the table function (issue 24)
    (
        "json_table_from",
        "SELECT j.n, j.v FROM JSON_TABLE(?, '$[*]' COLUMNS (n FOR ORDINALITY, v INT PATH '$')) j",
        ["[3, 5]"],
        "ok",
    ),
    (
        "json_table_lateral_comma",
        "SELECT e.id, j.status, j.tag FROM order_events e, JSON_TABLE(e.payload, '$' COLUMNS "
        "(status VARCHAR(32) PATH '$.status', NESTED PATH '$.tags[*]' COLUMNS "
        "(tag VARCHAR(16) PATH '$'))) j ORDER BY e.id LIMIT 3",
        [],
        "ok",
    ),
    (
        "json_table_join",
        "SELECT o.id, j.x FROM orders o CROSS JOIN JSON_TABLE('[1]', '$[*]' COLUMNS "
        "(x INT PATH '$')) AS j WHERE o.id = ?",
        [100001],
        "ok",
    ),
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
    ("into_outfile_after_limit", "SELECT * FROM orders LIMIT 1 INTO OUTFILE '/tmp/o'", [], F),
    ("procedure_analyse", "SELECT * FROM orders PROCEDURE ANALYSE()", [], F),
    ("values_statement", "VALUES (1)", [], F),
    ("table_statement", "TABLE orders", [], F),  # sqlglot's SELECT * FROM orders
    ("handler_read", "HANDLER orders READ FIRST", [], F),
    ("skip_locked", "SELECT * FROM orders FOR UPDATE SKIP LOCKED", [], F),
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
    ("udf_exec", "SELECT sys_exec('id')", [], F),
    ("uuid_mac_address", "SELECT UUID()", [], F),
    ("uuid_short_server_id", "SELECT UUID_SHORT()", [], F),
    ("last_insert_id", "SELECT LAST_INSERT_ID()", [], F),
    ("found_rows", "SELECT FOUND_ROWS()", [], F),
    ("lastval", "SELECT LASTVAL(s)", [], F),
    ("password_fn", "SELECT PASSWORD('x')", [], F),
    ("values_fn", "SELECT VALUES(id) FROM orders", [], F),
    # stored functions run with their DEFINER's rights: only built-ins may be called
    ("qualified_fn_other_schema", "SELECT otherdb.fn(1)", [], F),
    # JSON_TABLE anywhere but as a FROM/JOIN source is a stored function lookup
    ("json_table_select_list", "SELECT JSON_TABLE('[1]', '$[*]' COLUMNS (x INT PATH '$'))", [], F),
    ("json_table_where", "SELECT 1 FROM orders WHERE JSON_TABLE(1) = 1", [], F),
    (
        "json_table_after_select_comma",
        "SELECT 1, JSON_TABLE('[1]', '$[*]' COLUMNS (x INT PATH '$')) FROM orders",
        [],
        F,
    ),
    (
        "json_table_in_extract_from",
        "SELECT EXTRACT(YEAR FROM JSON_TABLE('[1]', '$' COLUMNS (x INT PATH '$')))",
        [],
        F,
    ),
    (
        "json_table_space",
        "SELECT * FROM JSON_TABLE ('[1]', '$[*]' COLUMNS (x INT PATH '$')) j",
        [],
        F,
    ),
    (
        "json_table_stored_fn_inside",
        "SELECT * FROM JSON_TABLE(peek(1), '$[*]' COLUMNS (x INT PATH '$')) j",
        [],
        F,
    ),
    (
        "json_table_columns_call",
        "SELECT * FROM JSON_TABLE(COLUMNS(1), '$' COLUMNS (x INT PATH '$')) j",
        [],
        F,
    ),
    ("columns_call", "SELECT COLUMNS(1)", [], F),
    ("qualified_fn_sys", "SELECT sys.format_bytes(1)", [], F),
    ("qualified_fn_builtin_name", "SELECT shop.upper('x')", [], F),
    ("qualified_fn_backticks", "SELECT `sys`.`format_bytes`(1)", [], F),
    ("qualified_fn_spaced", "SELECT sys . format_bytes (1)", [], F),
    ("qualified_fn_deep", "SELECT id FROM orders WHERE a.b.fn(id)", [], F),
    ("stored_fn_unqualified", "SELECT myfn(1)", [], F),
    # sqlglot misreads these (alias list, operator, Oracle syntax); the server calls the functions
    ("misparsed_file", "SELECT FILE(id) FROM orders", [], F),
    ("misparsed_glob", "SELECT GLOB(1, 2)", [], F),
    ("misparsed_namespace", "SELECT NAMESPACE(id) FROM orders", [], F),
    ("misparsed_connect_by_root", "SELECT CONNECT_BY_ROOT(1)", [], F),
    ("dollar_name", "SELECT $fn(1)", [], F),
    ("digit_name", "SELECT 1fn(1)", [], F),
    ("cte_column_list", "WITH x(n) AS (SELECT 1) SELECT n FROM x", [], "ok"),
    (
        "match_against",
        "SELECT COUNT(*) FROM refunds WHERE MATCH(error_message) AGAINST ('connection')",
        [],
        E,
    ),
    ("not_a_builtin_here", "SELECT format_bytes(1)", [], F),
    ("sqlglot_only_fn", "SELECT initcap('x')", [], F),
    ("builtin_name_spaced", "SELECT count (id) FROM orders", [], F),
    ("builtin_name_comment", "SELECT sum/**/(id) FROM orders", [], F),
    ("builtin_name_quoted", "SELECT `count`(id) FROM orders", [], F),
    ("special_fn_spaced", "SELECT substring ('abc', 1)", [], F),
    ("native_fn_spaced", "SELECT mid ('abc', 1, 1)", [], F),
    # session introspection
    ("current_role_bare", "SELECT CURRENT_ROLE", [], F),
    ("current_role_lower", "SELECT id FROM orders WHERE current_role IS NULL", [], F),
    ("current_user_bare", "SELECT CURRENT_USER", [], F),
    ("current_role_fn", "SELECT CURRENT_ROLE()", [], F),
    ("session_user_fns", "SELECT SESSION_USER(), SYSTEM_USER()", [], F),
    ("database_fn", "SELECT DATABASE()", [], F),
    ("schema_fn", "SELECT SCHEMA()", [], F),
    ("connection_id", "SELECT CONNECTION_ID()", [], F),
    ("system_var_global", "SELECT @@global.datadir", [], F),
    # information_schema: only the data source's own schema, without physical names
    (
        "info_schema_unfiltered",
        "SELECT INDEX_NAME FROM information_schema.STATISTICS WHERE TABLE_NAME = 'orders'",
        [],
        F,
    ),
    ("info_schema_all_tables", "SELECT TABLE_NAME FROM information_schema.TABLES", [], F),
    (
        "info_schema_or",
        "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() OR 1",
        [],
        F,
    ),
    (
        "info_schema_literal_schema",
        "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'mysql'",
        [],
        F,
    ),
    (
        "info_schema_schema_column",
        "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
        "WHERE TABLE_SCHEMA = DATABASE()",
        [],
        F,
    ),
    (
        "info_schema_star",
        "SELECT * FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()",
        [],
        F,
    ),
    (
        "info_schema_one_of_two_filtered",
        "SELECT c.COLUMN_NAME FROM information_schema.COLUMNS c JOIN information_schema.TABLES t "
        "ON t.TABLE_NAME = c.TABLE_NAME WHERE c.TABLE_SCHEMA = DATABASE()",
        [],
        F,
    ),
    (
        "info_schema_union_unfiltered",
        "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() "
        "UNION SELECT TABLE_NAME FROM information_schema.TABLES",
        [],
        F,
    ),
    (
        "info_schema_cte_unfiltered",
        "WITH x AS (SELECT TABLE_NAME FROM information_schema.TABLES) SELECT * FROM x",
        [],
        F,
    ),
    (
        "info_schema_subquery_unfiltered",
        "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() "
        "AND TABLE_NAME IN (SELECT TABLE_NAME FROM information_schema.COLUMNS)",
        [],
        F,
    ),
    (
        "info_schema_routines",
        "SELECT ROUTINE_NAME FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE()",
        [],
        F,
    ),
    (
        "info_schema_view_definer",
        "SELECT DEFINER FROM information_schema.VIEWS WHERE TABLE_SCHEMA = DATABASE()",
        [],
        F,
    ),
    (
        "info_schema_privileges",
        "SELECT PRIVILEGES FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()",
        [],
        F,
    ),
    ("info_schema_schemata", "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA", [], F),
    (  # the server reads `BETWEEN 'a' AND (TABLE_SCHEMA = DATABASE())`: no AND term
        "info_schema_between_trap",
        "SELECT TABLE_NAME FROM information_schema.TABLES "
        "WHERE TABLE_NAME BETWEEN 'a' AND TABLE_SCHEMA = DATABASE()",
        [],
        F,
    ),
    (
        "info_schema_pipes_or",
        "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() || 1",
        [],
        F,
    ),
    (
        "info_schema_is_true",
        "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() IS TRUE",
        [],
        F,
    ),
    (
        "info_schema_order_by_schema",
        "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() "
        "ORDER BY TABLE_SCHEMA",
        [],
        F,
    ),
    (
        "info_schema_filter_in_on_only",
        "SELECT o.id FROM orders o JOIN information_schema.TABLES t "
        "ON t.TABLE_SCHEMA = DATABASE() AND t.TABLE_NAME = 'orders'",
        [],
        F,
    ),
    # other schemas
    ("mysql_schema", "SELECT * FROM mysql.user", [], F),
    ("mysql_schema_backticks", "SELECT * FROM `mysql`.`user`", [], F),
    ("other_schema_column", "SELECT mysql.user.User FROM orders", [], F),
    ("other_schema_cte", "WITH x AS (SELECT * FROM mysql.user) SELECT * FROM x", [], F),
    ("other_schema_describe", "DESCRIBE mysql.user", [], F),
    ("sys_schema", "SELECT * FROM sys.version", [], F),
    ("dblink", "SELECT * FROM orders@dblink", [], F),
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
    # a param's value glued to a name ends the name for the server (`peek2(1)`)
    ("placeholder_ends_a_function_name", "SELECT peek?(1)", [2], F),
    ("placeholder_starts_a_name", "SELECT ?x FROM orders", [1], F),
    ("placeholder_ends_a_variable", "SELECT @?", [1], F),
    ("placeholder_after_a_literal", "SELECT 'a'?", ["b"], F),
    ("placeholders_spaced_by_punctuation", "SELECT id FROM orders WHERE id IN (?,?)", [1, 2], "ok"),
    # server-side errors
    ("unknown_column", "SELECT nope FROM orders", [], E),
    ("unknown_table", "SELECT * FROM nope", [], E),
    # A division by zero answers NULL with warning 1365: said beside the row, not an error
    # (issue 35, item 13); a warning that cuts or corrupts a value still is (1292 below).
    ("division_warning", "SELECT 1 / 0", [], "ok"),
    ("cast_warning", "SELECT CAST(? AS SIGNED)", ["zz"], E),
    ("empty", "   ", [], F),
)

"""Shapes of real logs that Elastic's integrations parse and a named format must read too.

The lines are written here in the shapes of the samples Elastic's integration packages ship
with the documents their ingest pipelines make of them (elastic/integrations,
`packages/<pkg>/data_stream/<ds>/_dev/test/pipeline/*.log` and `*.log-expected.json`), with our
own hosts, times and messages; no byte of those samples is copied. Each test compares what
`query_logs` reads with what the pipeline makes of the same shape: the number of records, their
time in UTC, their level and message."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from logs_helpers import search_written

from contracts import LogsUpstream

NOW = datetime(2026, 12, 4, 20, 0, tzinfo=UTC).timestamp()


def read(tmp_path: Path, fmt: str, text: str, query: str = "") -> LogsUpstream:
    return search_written(tmp_path, fmt, text, query, now=NOW)


# A Kubernetes container's text log keeps its own level at the start of each line: CoreDNS's
# `[ERROR] plugin/errors: ...` (packages/coredns, `log.level` `error`), klog's `E1204 ...` of
# the control plane's pods (kube-apiserver, kube-controller-manager, kube-scheduler,
# kube-proxy), zap's console `<time>\t<level>\t` (istio-proxy, controller-runtime's
# operators), HashiCorp's hclog `2026-12-04T19:12:00.123Z [ERROR] core: ...` (Vault, Consul,
# Nomad) and logfmt's `level=error` (Prometheus, Loki, Grafana). Before, every such record had
# no level: `level:error` over kube-system's pods answered NO_EVIDENCE.
CRI_TEXT_LEVELS = (
    '2026-12-04T19:10:01.100000000Z stdout F [INFO] 10.0.0.7:42114 - 64820 "A IN shop.example.'
    ' udp 57 false 1232" NOERROR qr,aa,rd 66 0.000150566s\n'
    "2026-12-04T19:10:02.200000000Z stdout F [ERROR] plugin/errors: 2 shop.example. A: dial tcp"
    " 10.0.0.53:853: i/o timeout\n"
    "2026-12-04T19:10:03.300000000Z stdout F [WARNING] plugin/health: Local health request to"
    ' "http://:8080/health" took more than 1s: 1.5s\n'
    "2026-12-04T19:11:00.000000000Z stderr F E1204 19:11:00.000000       1 reflector.go:138]"
    " k8s.io/client-go/informers/factory.go:134: Failed to watch *v1.Node: unauthorized\n"
    "2026-12-04T19:11:01.000000000Z stderr F I1204 19:11:01.000000       1 controllermanager.go"
    ':190] "Starting" version="v1.31.0"\n'
    "2026-12-04T19:12:00.123000000Z stderr F 2026-12-04T19:12:00.123Z [ERROR] core: failed to"
    ' unseal: error="context deadline exceeded"\n'
    "2026-12-04T19:13:00.000000000Z stderr F ts=2026-12-04T19:13:00.000Z caller=scrape.go:1 "
    'level=warn component="scrape manager" msg="Append failed" err="out of bounds"\n'
    "2026-12-04T19:14:00.000000000Z stdout F GET /healthz 200 [INFO] is not a level here\n"
    "2026-12-04T19:15:00.000000000Z stderr F 2026-12-04T19:15:00.000000Z\twarn\tenvoy config"
    "\tStreamAggregatedResources gRPC config stream to xds-grpc closed: 14, connection error\n"
    "2026-12-04T19:16:00.000000000Z stderr F 2026-12-04T19:16:00.000Z\tERROR\tReconciler error"
    '\t{"controller": "shop", "error": "conflict"}\n'
)


def test_a_container_text_logs_own_level_is_its_records_level(tmp_path: Path) -> None:
    every = read(tmp_path, "cri", CRI_TEXT_LEVELS)
    assert every.match_count == 10 and not every.unparsed_lines
    by_time = {r.timestamp: r for r in every.records}
    levels = [by_time[t].level for t in sorted(by_time)]
    assert levels == [
        "INFO",
        "ERROR",
        "WARN",
        "ERROR",
        "INFO",
        "ERROR",
        "WARN",
        "",
        "WARN",
        "ERROR",
    ]
    coredns = by_time["2026-12-04T19:10:02.200Z"]
    assert coredns.message.startswith("[ERROR] plugin/errors: 2 shop.example.")  # as written
    assert by_time["2026-12-04T19:10:03.300Z"].fields["level_name"] == "WARNING"
    assert by_time["2026-12-04T19:11:00.000Z"].fields["level_name"] == "E"
    assert read(tmp_path, "cri", CRI_TEXT_LEVELS, "level:error").match_count == 4  # before: 0
    assert read(tmp_path, "cri", CRI_TEXT_LEVELS, "unauthorized level:error").match_count == 1


def test_a_docker_text_logs_own_level_is_its_records_level(tmp_path: Path) -> None:
    lines = (
        '{"log":"[ERROR] plugin/errors: 2 shop.example. A: i/o timeout\\n","stream":"stdout",'
        '"time":"2026-12-04T19:10:02.2Z"}\n'
        '{"log":"plain text, no level\\n","stream":"stdout","time":"2026-12-04T19:10:03.3Z"}\n'
    )
    every = read(tmp_path, "docker", lines)
    assert sorted(r.level for r in every.records) == ["", "ERROR"]


# Python's own default layouts in a container: `logging.basicConfig()`'s
# `%(levelname)s:%(name)s:%(message)s` and uvicorn's `%(levelprefix)s %(message)s` (the level,
# a colon, padded to 9: `INFO:     `, `ERROR:    `), the two a Python service writes unless
# told otherwise. Before, no level: `level:error` missed `ERROR:root:charge failed ...`.
PYTHON_DEFAULTS = (
    "2026-12-04T19:20:00.000000000Z stderr F INFO:     Started server process [7]\n"
    '2026-12-04T19:20:01.000000000Z stdout F INFO:     10.0.0.9:53422 - "GET /orders HTTP/1.1"'
    " 200 OK\n"
    "2026-12-04T19:20:02.000000000Z stderr F ERROR:    Exception in ASGI application\n"
    "2026-12-04T19:20:03.000000000Z stderr F WARNING:shop.orders:pool at 90%\n"
    "2026-12-04T19:20:04.000000000Z stderr F ERROR:root:charge failed for order o-1042\n"
    "2026-12-04T19:20:05.000000000Z stderr F CRITICAL:shop:out of connections\n"
    "2026-12-04T19:20:06.000000000Z stdout F ERRORS: 3 retried, not a level\n"
    "2026-12-04T19:20:07.000000000Z stdout F Error:root:not Python's spelling\n"
)


def test_pythons_default_layouts_in_a_container_give_a_level(tmp_path: Path) -> None:
    every = read(tmp_path, "cri", PYTHON_DEFAULTS)
    assert [r.level for r in sorted(every.records, key=lambda r: r.timestamp)] == [
        "INFO", "INFO", "ERROR", "WARN", "ERROR", "FATAL", "", "",
    ]  # fmt: skip
    failed = read(tmp_path, "cri", PYTHON_DEFAULTS, '"charge failed" level:error')
    assert failed.match_count == 1  # before: 0
    assert failed.records[0].message == "ERROR:root:charge failed for order o-1042"  # as written
    docker = (
        '{"log":"ERROR:root:charge failed\\n","stream":"stderr","time":"2026-12-04T19:20:04Z"}\n'
    )
    assert [r.level for r in read(tmp_path, "docker", docker).records] == ["ERROR"]


# ActiveMQ's default layout (its `conf/log4j2.properties`: `%d | %-5p | %m | %c | %t%n`): the
# message between the level and the logger, the thread last (packages/activemq, `message`
# without the pipes, `log.logger`, `process.thread.name`). Before, the message started `| ` and
# ended with the logger and thread, and `logger:...` found none of them.
ACTIVEMQ = (
    "2026-12-04 19:27:39,190 | INFO  | Using Persistence Adapter: KahaDBPersistenceAdapter[/var"
    "/lib/activemq/kahadb] | org.apache.activemq.broker.BrokerService | main\n"
    "2026-12-04 19:27:40,434 | WARN  | Store limit is 102400 mb | usable 81977 mb - resetting"
    " | org.apache.activemq.broker.BrokerService | main\n"
    "2026-12-04 19:29:09,040 | WARN  | /admin/index.action | org.eclipse.jetty.server.HttpChannel"
    " | qtp2064787513-43\n"
    "jakarta.servlet.ServletException: org.springframework.web.servlet.NoHandlerFoundException:"
    " No endpoint GET /admin/index.action.\n"
    "\tat org.eclipse.jetty.server.handler.HandlerCollection.handle(HandlerCollection.java:157)\n"
    "\t... 18 more\n"
    "2026-12-04 19:30:00,001 | ERROR | Could not accept connection from tcp://10.0.0.7:51234 |"
    " org.apache.activemq.broker.TransportConnector | ActiveMQ Transport Server Thread Handler:"
    " tcp://0.0.0.0:61616\n"
)


def test_activemqs_pipe_layout_gives_message_logger_and_thread(tmp_path: Path) -> None:
    every = read(tmp_path, "log4j", ACTIVEMQ)
    assert every.match_count == 4 and not every.unparsed_lines
    first, store, jetty, accept = sorted(every.records, key=lambda r: r.timestamp)
    assert first.timestamp == "2026-12-04T19:27:39.190Z" and first.level == "INFO"
    assert first.message.startswith("Using Persistence Adapter: KahaDB")
    assert first.message.endswith("kahadb]")
    assert first.fields["logger"] == "org.apache.activemq.broker.BrokerService"
    assert first.fields["thread"] == "main"
    assert store.message == "Store limit is 102400 mb | usable 81977 mb - resetting"
    assert jetty.message.startswith("/admin/index.action\njakarta.servlet.ServletException")
    assert jetty.fields["exception"] == "jakarta.servlet.ServletException"
    assert jetty.fields["thread"] == "qtp2064787513-43"
    assert accept.level == "ERROR" and accept.message.endswith("tcp://10.0.0.7:51234")
    assert (
        accept.fields["thread"] == "ActiveMQ Transport Server Thread Handler: tcp://0.0.0.0:61616"
    )
    logger = "logger:org.apache.activemq.broker.BrokerService"
    assert read(tmp_path, "log4j", ACTIVEMQ, logger).match_count == 2  # before: 0


# HashiCorp's hclog JSON (Vault's, Consul's, Nomad's `log_format = "json"`): `@level`,
# `@message`, `@timestamp`, `@module` (packages/hashicorp_vault, data_stream log: `log.level`
# from `@level`). Before, the time and message were read and no record had a level.
HCLOG_JSON = (
    '{"@level":"error","@message":"failed to revoke lease","@module":"expiration",'
    '"@timestamp":"2026-12-04T19:30:48.194192Z","error":"failed to revoke entry: dial tcp:'
    ' lookup iam.example.com: server misbehaving","lease_id":"aws/creds/shop/x1"}\n'
    '{"@level":"warn","@message":"failed to contact","@module":"storage.raft",'
    '"@timestamp":"2026-12-04T19:31:06.945541Z","server-id":"vault-2","time":4959141198}\n'
    '{"@level":"info","@message":"revoked lease","@module":"expiration",'
    '"@timestamp":"2026-12-04T19:33:08.867457Z","lease_id":"auth/token/create/x2"}\n'
)


def test_hclogs_json_level_is_read(tmp_path: Path) -> None:
    every = read(tmp_path, "jsonl", HCLOG_JSON)
    assert every.match_count == 3 and not every.unparsed_lines
    by_time = sorted(every.records, key=lambda r: r.timestamp)
    assert [r.level for r in by_time] == ["ERROR", "WARN", "INFO"]  # before: none
    assert by_time[0].timestamp == "2026-12-04T19:30:48.194Z"
    assert by_time[0].message == "failed to revoke lease"
    assert read(tmp_path, "jsonl", HCLOG_JSON, "level:error").match_count == 1


# JBoss Log Manager's default `%d %-5p [%c] (%t) %s%e%n` (WildFly, Keycloak before 17, JBoss
# EAP; Quarkus and Keycloak 17+ the same with a date): the logger in brackets, the thread in
# parentheses (packages/keycloak, data_stream log: `log.logger`, `process.thread.name`). Before,
# the logger was read as the thread and the message kept both.
JBOSS = (
    "19:01:42,548 INFO  [org.keycloak.services] (ServerService Thread Pool -- 64)"
    " KC-SERVICES0009: Added user 'admin' to realm 'master'\n"
    "19:01:45,403 WARN  [org.keycloak.events] (default task-1) type=LOGIN_ERROR, realmId=shop,"
    " clientId=web, userId=null, ipAddress=10.0.0.7, error=invalid_redirect_uri\n"
    "2026-12-04 19:40:00,001 ERROR [org.keycloak.services.error.KeycloakErrorHandler]"
    " (executor-thread-1) Uncaught server error: java.lang.NullPointerException\n"
    "\tat org.keycloak.services.resources.admin.UserResource.getUser(UserResource.java:120)\n"
)


def test_jboss_layout_gives_logger_and_thread(tmp_path: Path) -> None:
    every = read(tmp_path, "log4j", JBOSS)
    assert every.match_count == 3 and not every.unparsed_lines
    added, login, uncaught = sorted(every.records, key=lambda r: r.timestamp)
    assert added.timestamp == "2026-12-04T19:01:42.548Z" and added.level == "INFO"
    assert added.fields["logger"] == "org.keycloak.services"
    assert added.fields["thread"] == "ServerService Thread Pool -- 64"
    assert added.message == "KC-SERVICES0009: Added user 'admin' to realm 'master'"
    assert login.level == "WARN" and login.message.startswith("type=LOGIN_ERROR, realmId=shop")
    assert uncaught.fields["logger"] == "org.keycloak.services.error.KeycloakErrorHandler"
    assert uncaught.fields["thread"] == "executor-thread-1"
    assert read(tmp_path, "log4j", JBOSS, "logger:org.keycloak.events").match_count == 1


def test_a_thread_in_brackets_before_a_file_in_parentheses_stays_the_thread(
    tmp_path: Path,
) -> None:
    line = "2026-12-04 19:00:00,000 INFO  [main] (Shop.java:12) - started\n"  # `[%t] (%F:%L)`
    only = read(tmp_path, "log4j", line).records[0]
    assert only.fields["thread"] == "main" and "logger" not in only.fields


# Tomcat's `localhost.yyyy-mm-dd.log` (OneLineFormatter): a servlet's uncaught exception is
# `Servlet.service() for servlet [jsp] ... threw exception [<its message>] with root cause`,
# then the root cause's class and message, then its frames; a JSP compile error's message spans
# lines of its own, unindented (packages/apache_tomcat, data_stream localhost: one document,
# those lines in `error.stack_trace`). Before, each such line was a line not in the format:
# `"cannot be resolved" level:error` found nothing and `check` said 38 of 45 lines not in it.
TOMCAT_JSP = (
    "04-Dec-2026 19:40:03.713 INFO [localhost-startStop-1] org.apache.catalina.core."
    "ApplicationContext.log ContextListener: contextInitialized()\n"
    "04-Dec-2026 19:41:32.233 SEVERE [http-nio-8080-exec-1] org.apache.catalina.core."
    "StandardWrapperValve.invoke Servlet.service() for servlet [jsp] in context with path"
    " [/shop] threw exception [Unable to compile class for JSP: \n"
    "\n"
    "An error occurred at line: [7] in the jsp file: [/cart.jsp]\n"
    "OrderService cannot be resolved to a type\n"
    "6: <body>\n"
    "7: <% OrderService orders = new OrderService(); %>\n"
    "\n"
    "\n"
    "Stacktrace:] with root cause\n"
    "\torg.apache.jasper.JasperException: Unable to compile class for JSP: \n"
    "\n"
    "An error occurred at line: [7] in the jsp file: [/cart.jsp]\n"
    "OrderService cannot be resolved to a type\n"
    "6: <body>\n"
    "7: <% OrderService orders = new OrderService(); %>\n"
    "\n"
    "\n"
    "Stacktrace:\n"
    "\t\tat org.apache.jasper.compiler.DefaultErrorHandler.javacError(DefaultErrorHandler.java:"
    "102)\n"
    "\t\tat java.base/java.lang.Thread.run(Thread.java:829)\n"
    "04-Dec-2026 19:42:00.001 INFO [main] org.apache.catalina.startup.Catalina.start Server"
    " startup in [1804] milliseconds\n"
    "a line of another program\n"
    "04-Dec-2026 19:43:00.001 INFO [main] org.apache.catalina.core.StandardServer.await Ready\n"
)


def test_tomcats_multi_line_exception_message_is_one_record(tmp_path: Path) -> None:
    for fmt in ("plain", "log4j"):
        every = read(tmp_path, fmt, TOMCAT_JSP)
        assert every.match_count == 4 and every.unparsed_lines == 1  # the other program's line
        severe = next(r for r in every.records if r.level == "ERROR")
        assert severe.timestamp == "2026-12-04T19:41:32.233Z"
        assert severe.message.count("OrderService cannot be resolved") == 2
        assert severe.message.endswith("at java.base/java.lang.Thread.run(Thread.java:829)")
        assert severe.fields["exception"] == "org.apache.jasper.JasperException"
        query = '"cannot be resolved" level:error'
        assert read(tmp_path, fmt, TOMCAT_JSP, query).match_count == 1  # before: 0


# The Kubernetes API server's audit log (`--audit-log-path`, JSON lines of `audit.k8s.io/v1`
# Events; packages/kubernetes, data_stream audit_logs): the time is `requestReceivedTimestamp`,
# `level` is the audit policy's detail (Metadata, Request, RequestResponse), no severity.
# Before, no line had a time key jsonl knows: every call an EXECUTION error, and `check` said
# "no line is in format jsonl" of a file of JSON.
KUBE_AUDIT = (
    '{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a-1",'
    '"stage":"ResponseComplete","requestURI":"/api/v1/namespaces/shop/pods","verb":"list",'
    '"user":{"username":"system:serviceaccount:shop:deployer","groups":["system:authenticated"]},'
    '"sourceIPs":["10.0.0.7"],"userAgent":"kubectl/v1.31.0","objectRef":{"resource":"pods",'
    '"namespace":"shop","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},'
    '"requestReceivedTimestamp":"2026-12-04T19:22:18.819232Z","stageTimestamp":'
    '"2026-12-04T19:22:18.822532Z","annotations":{"authorization.k8s.io/decision":"allow",'
    '"authorization.k8s.io/reason":""}}\n'
    '{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":"a-2",'
    '"stage":"ResponseComplete","requestURI":"/api/v1/namespaces/shop/secrets/orders-db",'
    '"verb":"get","user":{"username":"alice"},"sourceIPs":["203.0.113.9"],"objectRef":'
    '{"resource":"secrets","namespace":"shop","name":"orders-db","apiVersion":"v1"},'
    '"responseStatus":{"metadata":{},"status":"Failure","reason":"Forbidden","code":403},'
    '"requestReceivedTimestamp":"2026-12-04T19:30:00.100000Z","stageTimestamp":'
    '"2026-12-04T19:30:00.104000Z","annotations":{"authorization.k8s.io/decision":"forbid"}}\n'
    '{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Request","auditID":"a-3",'
    '"stage":"RequestReceived","requestURI":"/apis/apps/v1/namespaces/shop/deployments",'
    '"verb":"create","user":{"username":"alice"},"sourceIPs":["203.0.113.9"],'
    '"requestReceivedTimestamp":"2026-12-04T19:31:00.000000Z","stageTimestamp":'
    '"2026-12-04T19:31:00.000000Z"}\n'
)


def test_the_kubernetes_audit_log_is_read(tmp_path: Path) -> None:
    every = read(tmp_path, "jsonl", KUBE_AUDIT)
    assert every.match_count == 3 and not every.unparsed_lines
    listed, denied, received = sorted(every.records, key=lambda r: r.timestamp)
    assert listed.timestamp == "2026-12-04T19:22:18.819Z" and listed.level == "INFO"
    assert listed.message == "list /api/v1/namespaces/shop/pods 200"
    assert listed.fields["audit_level"] == "Metadata"  # the policy's detail, no severity
    assert denied.level == "WARN" and denied.fields["user_username"] == "alice"
    assert denied.message == "get /api/v1/namespaces/shop/secrets/orders-db 403"
    assert (
        received.level == ""
        and received.message == "create /apis/apps/v1/namespaces/shop/deployments"
    )
    assert read(tmp_path, "jsonl", KUBE_AUDIT, "secrets level:warn").match_count == 1


def test_a_phrase_of_an_audit_events_message_finds_it(tmp_path: Path) -> None:
    # its message is made of its verb, URI and code (`verb requestURI code`), apart in the
    # line: the prefilter looked for the phrase in the line and skipped the Event, so a
    # phrase of the message shown found nothing
    for phrase in ('"get /api/v1/namespaces/shop/secrets"', '"orders-db 403"'):
        found = read(tmp_path, "jsonl", KUBE_AUDIT, phrase)
        assert found.match_count == 1, phrase


def test_check_names_the_key_that_holds_the_time_of_json_lines_jsonl_cannot_time(
    tmp_path: Path,
) -> None:
    from workers.sources.logs.check import check_logs
    from workers.sources.logs.config import parse_logs_config

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "events.log").write_text(  # JSON lines whose time is under a key jsonl does not know
        '{"eventTime":"2026-12-04T19:00:00.000Z","reason":"BackOff","note":"Back-off restarting'
        ' failed container","regarding":{"kind":"Pod","name":"orders-7d9"}}\n'
    )
    config = parse_logs_config(
        f'roots = ["{logs}"]\n[topics.SYSTEM_EVENTS]\nbackend = "file"\nformat = "jsonl"\n'
        f'paths = ["{logs}/*.log"]\n'
    )
    (topic,) = check_logs(config, NOW)
    (problem,) = topic.problems()
    assert problem.endswith(
        'no line is in format jsonl: no key it reads as the time; "eventTime" holds one:'
        ' [topics.SYSTEM_EVENTS.fields] time = "eventTime"'
    )  # before: "no line is in format jsonl", of a file of JSON lines


# A Secret's values in an audit Event logged at Request or RequestResponse (a create, a patch,
# a get, a list of Secrets): its `data` is base64 and its `stringData` plain, under names of
# the owner's choosing (`api`, `conn`) that no secret's name rule knows. Before, both were shown.
SECRET_AUDIT = (
    '{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":"s-1",'
    '"stage":"ResponseComplete","requestURI":"/api/v1/namespaces/shop/secrets","verb":"create",'
    '"user":{"username":"alice"},"objectRef":{"resource":"secrets","namespace":"shop"},'
    '"requestObject":{"kind":"Secret","apiVersion":"v1","metadata":{"name":"db","annotations":'
    '{"kubectl.kubernetes.io/last-applied-configuration":"{\\"data\\":{\\"api\\":'
    '\\"c2VjcmV0dmFsdWU=\\"}}"}},"data":{"api":"c2VjcmV0dmFsdWU="},"stringData":'
    '{"conn":"plainsecretvalue"}},"responseObject":'
    '{"kind":"Secret","metadata":{"name":"db"},"data":{"api":"c2VjcmV0dmFsdWU=","conn":'
    '"cGxhaW5zZWNyZXR2YWx1ZQ=="}},"responseStatus":{"code":201},'
    '"requestReceivedTimestamp":"2026-12-04T19:40:00.000000Z"}\n'
    '{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Request","auditID":"s-2",'
    '"stage":"ResponseComplete","requestURI":"/api/v1/namespaces/shop/secrets/db","verb":'
    '"patch","user":{"username":"alice"},"objectRef":{"resource":"secrets","name":"db"},'
    '"requestObject":[{"op":"replace","path":"/data/api","value":"bmV3c2VjcmV0dmFsdWU="}],'
    '"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-12-04T19:41:00.000000Z"}\n'
    '{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":"s-3",'
    '"stage":"ResponseComplete","requestURI":"/api/v1/namespaces/shop/secrets","verb":"list",'
    '"user":{"username":"alice"},"objectRef":{"resource":"secrets","namespace":"shop"},'
    '"responseObject":{"kind":"SecretList","items":[{"metadata":{"name":"db"},"data":{"api":'
    '"c2VjcmV0dmFsdWU="}}]},"responseStatus":{"code":200},'
    '"requestReceivedTimestamp":"2026-12-04T19:42:00.000000Z"}\n'
)


def test_a_secrets_values_in_an_audit_log_are_masked(tmp_path: Path) -> None:
    import msgspec

    every = read(tmp_path, "jsonl", SECRET_AUDIT)
    assert every.match_count == 3 and not every.unparsed_lines
    shown = msgspec.json.encode(every.records).decode()
    for value in ("c2VjcmV0dmFsdWU", "plainsecretvalue", "cGxhaW5zZWNyZXR2", "bmV3c2VjcmV0"):
        assert value not in shown
    assert "requestObject_metadata_name" in shown  # the Secret's name is evidence, kept
    assert read(tmp_path, "jsonl", SECRET_AUDIT, "plainsecretvalue").match_count == 0


# `kubectl exec` is logged by its URI, the command's words as `command=` parameters: a command
# with its password (mysql -p..., curl -u user:password) was shown in the message and field.
EXEC_QUERIES = (
    "command=mysql&command=-uroot&command=-pS3cretPw9&container=db&stdin=true",
    "command=curl&command=-u&command=admin%3Ahunter2xyz&command=http%3A%2F%2Fapi%2F",
    "command=ls&command=-l&container=db",
)
EXEC_AUDIT = "".join(
    f'{{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"e-{i}",'
    f'"stage":"ResponseStarted","requestURI":"/api/v1/namespaces/shop/pods/db-0/exec?{query}",'
    '"verb":"create","user":{"username":"alice"},"objectRef":{"resource":"pods",'
    '"subresource":"exec"},"responseStatus":{"code":101},'
    f'"requestReceivedTimestamp":"2026-12-04T19:5{i}:00.000000Z"}}\n'
    for i, query in enumerate(EXEC_QUERIES)
)


def test_a_password_in_an_exec_command_of_an_audit_log_is_masked(tmp_path: Path) -> None:
    import msgspec

    every = read(tmp_path, "jsonl", EXEC_AUDIT)
    assert every.match_count == 3
    shown = msgspec.json.encode(every.records).decode()
    assert "S3cretPw9" not in shown and "hunter2xyz" not in shown
    mysql, curl, ls = (r.message for r in sorted(every.records, key=lambda r: r.timestamp))
    assert "command=-p***" in mysql and "container=db" in mysql
    assert "command=admin%3A***" in curl or "command=admin:***" in curl
    assert ls.endswith("exec?command=ls&command=-l&container=db 101")  # unchanged
    assert read(tmp_path, "jsonl", EXEC_AUDIT, "S3cretPw9").match_count == 0

"""The fields each FILE format adds to a record beyond the topic's own, so a query may name
them (`FileLogSource` checks a query's fields against them), and which of them hold numbers
a query may compare (`bytes:>100000`)."""

from __future__ import annotations

from typing import Final

from workers.sources.logs.accesslog import ENVOY_FIELDS
from workers.sources.logs.cloudflare import CLOUDFLARE_FIELDS
from workers.sources.logs.cloudlogging import CLOUD_LOGGING_FIELDS
from workers.sources.logs.csvlog import CSVLOG_FIELDS
from workers.sources.logs.haproxy import HAPROXY_FIELDS
from workers.sources.logs.heroku import HEROKU_FIELDS
from workers.sources.logs.lambdalogs import LAMBDA_FIELDS, LAMBDA_NUMBERS
from workers.sources.logs.textformats import TEXT_FORMAT_FIELDS
from workers.sources.logs.w3c import W3C_FIELDS

__all__ = ["FORMAT_FIELDS", "FORMAT_NUMBERS"]

# Fields each format adds beyond the topic's own (so a query may name them).
FORMAT_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "jsonl": (
        "level_name",
        "fields_dropped",
        *ENVOY_FIELDS,
        *CLOUD_LOGGING_FIELDS,
        *CLOUDFLARE_FIELDS,
        *LAMBDA_FIELDS,  # Lambda's JSON log format's platform events
    ),
    "logfmt": ("level_name", "fields_dropped"),
    "cri": ("stream", "namespace", "pod", "container", "exception", "level_name", *ENVOY_FIELDS),
    "docker": (
        "stream",
        "container_id",
        "exception",
        "level_name",
        "tag",
        "fields_dropped",
        *ENVOY_FIELDS,
    ),
    "syslog": (
        "host",
        "app",
        "pid",
        "facility",
        "level_name",
        "structured_data",
        "msgid",
        "exception",
        "queue_id",  # Postfix's
        *HAPROXY_FIELDS,
        *HEROKU_FIELDS,
    ),
    "mysql_slow": ("db_instance", "thread_id", "rows_affected", "schema", "db_user"),
    **{name: (*fields, "level_name") for name, fields in TEXT_FORMAT_FIELDS.items()},
    "w3c": W3C_FIELDS,
    "postgresql_csv": (*CSVLOG_FIELDS, "level_name"),
}
# Of those, the ones that hold numbers (a query may compare them: `bytes:>100000`).
FORMAT_NUMBERS: Final = frozenset(
    {
        "bytes",
        "rows_affected",
        "thread_id",
        "fields_dropped",
        "bytes_received",
        "upstream_time_ms",
        "target_status",
        "client_port",
        *LAMBDA_NUMBERS,  # a Lambda REPORT's figures
        "upstream_bytes",  # the NGINX Ingress controller's
    }
)

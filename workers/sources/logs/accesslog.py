"""Web servers' access logs (`apache_access` = `nginx_access`, `textformats` names them all).

The common and combined formats, what a custom `LogFormat`/`log_format` adds before the
referer or after the user agent (`extra`), a virtual host first (Apache's `vhost_combined`,
nginx's `$host`: `vhost`) and a proxy chain where the client goes (`client` the chain, as
Filebeat's `remote_ip_list`); level from the status (5xx ERROR, 4xx WARN, else INFO).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import tzinfo
from typing import Final

from contracts.results import JsonScalar
from workers.sources.logs.multiline import Pending
from workers.sources.logs.records import Entry
from workers.sources.logs.stamps import STAMP, matched_ms

__all__ = ["access_head", "status_level"]

Head = Callable[[str], Pending | None]

_ACCESS: Final = re.compile(
    # the virtual host first (Apache's `vhost_combined` `%v:%p`, nginx's `$host`), and the
    # client a proxy chain (`$proxy_add_x_forwarded_for`, or `"$http_x_forwarded_for"` quoted
    # before `$remote_addr`): before, such lines were lines not in the format
    r'(?:(?P<vhost>[^\s",]+) )?(?P<client>"[^"]*" [^\s",]+'
    r'|(?:[^\s",]+(?:, [^\s",]+)+ )?[^\s",]+(?:, [^\s",]+)*)'
    r" \S+ (?P<user>\S+) \[" + STAMP + r'\] "(?P<request>(?:[^"\\]|\\.)*)"'
    r" (?P<status>\d{3}|-) (?P<bytes>\d+|-)"
    # what a custom LogFormat adds: before the referer (Apache's `%D`, lighttpd's byte
    # counts) and after the user agent (nginx's `"$http_x_forwarded_for" $request_time`)
    r'(?P<between>(?: [^\s"]+){0,16})'
    r'(?: "(?P<referer>(?:[^"\\]|\\.)*)" "(?P<agent>(?:[^"\\]|\\.)*)")?'
    r"(?P<after>.*)",
    re.S,
)
_CHAIN_GAP: Final = re.compile(r"(?<!,) ")
_REQUEST: Final = re.compile(r"(\S+) (\S+)(?: (\S+))?")


def status_level(code: int | None) -> str:
    """An access's level from its HTTP status: 5xx ERROR, 4xx WARN, else INFO ('' without)."""
    if code is None:
        return ""
    return "ERROR" if code >= 500 else "WARN" if code >= 400 else "INFO"


def access_head(zone: tzinfo, now_ms: int) -> Head:
    """The head of an access log line (common, combined, what a custom format adds)."""

    def head(text: str) -> Pending | None:
        found = _ACCESS.match(text)
        if found is None:
            return None

        def when() -> int | None:
            return matched_ms(found, zone, now_ms)

        def build(epoch: int) -> Entry:
            request, status, size = found.group("request", "status", "bytes")
            client = found.group("client")
            if client.startswith('"'):  # `"a, b" c`: one chain, as Filebeat's remote_ip_list
                chain, _, last = client[1:].rpartition('" ')
                client = f"{chain}, {last}" if chain.strip() else last
            else:  # `a, b c` (`$http_x_forwarded_for $remote_addr`)
                client = _CHAIN_GAP.sub(", ", client)
            fields: dict[str, JsonScalar] = {"client": client}
            if vhost := found.group("vhost"):
                fields["vhost"] = vhost
            if found.group("user") != "-":
                fields["user"] = found.group("user")
            if parts := _REQUEST.fullmatch(request):
                fields["method"], fields["uri"] = parts.group(1), parts.group(2)
                if parts.group(3):
                    fields["protocol"] = parts.group(3)
            code = int(status) if status.isdigit() else None
            if code is not None:
                fields["http_status"] = code
            if size.isdigit() and len(size) < 19:
                fields["bytes"] = int(size)
            referer, agent = found.group("referer", "agent")
            if referer not in (None, "-"):
                fields["referer"] = referer
            if agent not in (None, "-"):
                fields["user_agent"] = agent
            if extra := f"{found.group('between')}{found.group('after')}".strip():
                fields["extra"] = extra  # kept as written: searchable, never dropped
            return Entry(epoch, status_level(code), "", f"{request} {status} {size}", fields)

        return when, build

    return head

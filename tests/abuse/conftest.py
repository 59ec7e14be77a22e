"""What the hostile-submitter suites share (`test_hostile_requests`, `test_hostile_submitter`):
the key names and settings of prefix `aci`, and a private Redis 7 with the real `pipeline.acl`
users of that prefix per test (`server`; `test_acl` has its own, over every Redis binary)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pipeline.keys import Keys
from pipeline.settings import Settings
from tests.pipeline.acl_server import AclServer, acl_server

P = Keys("aci")
SETTINGS = Settings(prefix="aci", visibility_timeout_s=5.0, deadline_s=2.0, admit_resend_s=0.4)


@pytest.fixture
def server() -> Iterator[AclServer]:
    with acl_server(["aci"]) as running:
        yield running

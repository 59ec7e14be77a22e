"""Which admission path a chaos scenario's load client takes (no servers needed)."""

from __future__ import annotations

from chaos.scenario import base_env
from chaos.scenarios import SPECS
from pipeline.settings import Settings


def test_the_hostile_submitters_victims_go_through_the_workers_admission() -> None:
    # The red team drops requests not admitted yet (`XADD … MAXLEN 0`); its victims must send
    # requests for that to be tested: the load client is Redis's default user, which would
    # otherwise admit its own calls (`pipeline.admit_here`) and never meet the attack.
    [spec] = [s for s in SPECS if s.name == "hostile_submitter"]
    settings = Settings.from_env({**base_env("redis://127.0.0.1:1/0", "mysql://x"), **spec.env})
    assert settings.admit_here == "0"

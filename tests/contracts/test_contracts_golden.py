"""Golden JSON of canonical results and both views, for each tool and for errors.

Regenerate with `UPDATE_GOLDEN=1 pytest tests/contracts/test_contracts_golden.py`, then review
the diff of tests/golden/contracts/.
"""

from __future__ import annotations

import pytest
from contract_cases import CASES, run_case
from contract_golden import check_golden

from contracts import (
    DEFAULT_BOUNDS,
    ErrorCode,
    ErrorResult,
    control_view,
    decode_result,
    encode_result,
    encode_view,
    observe,
)

EXPECTED_ERROR_CODES = {
    "error_schema": ErrorCode.SCHEMA,
    "error_tool_call_id_in_arguments": ErrorCode.SCHEMA,
    "error_invalid_tool_call_id": ErrorCode.INVALID_TOOL_CALL_ID,
    "error_unknown_tool": ErrorCode.UNKNOWN_TOOL,
    "error_projection": ErrorCode.PROJECTION,
    "error_projection_logs": ErrorCode.PROJECTION,
    "error_cancelled": ErrorCode.CANCELLED,
    "error_cancelled_running": ErrorCode.CANCELLED,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_canonical_result_and_both_views(name: str) -> None:
    result, meta = run_case(name)
    observation = observe(result, DEFAULT_BOUNDS)
    check_golden(f"{name}.result", encode_result(result))
    check_golden(f"{name}.observation", encode_view(observation))
    check_golden(f"{name}.control", encode_view(control_view(result, meta, observation)))
    if name in EXPECTED_ERROR_CODES:
        assert isinstance(result, ErrorResult)
        assert result.error.code is EXPECTED_ERROR_CODES[name]


@pytest.mark.parametrize("name", sorted(CASES))
def test_canonical_json_round_trips(name: str) -> None:
    result, meta = run_case(name)
    data = encode_result(result)
    assert decode_result(meta.tool, data) == result
    assert encode_result(decode_result(meta.tool, data)) == data


def test_project_for_an_unknown_tool_is_an_error() -> None:
    from contracts import LookupKnowledgeRequest, project

    result = project("query_metrics", LookupKnowledgeRequest(query="x"), "c", {}, DEFAULT_BOUNDS)
    assert isinstance(result, ErrorResult) and result.error.code is ErrorCode.UNKNOWN_TOOL
    assert result.tool_call_id == "c"


@pytest.mark.parametrize("name", ["error_cancelled", "error_cancelled_running"])
def test_a_cancelled_call_is_an_error_never_no_evidence(name: str) -> None:
    # Both views say ERROR/CANCELLED, and the model reads that the call was stopped: never a
    # finding, never "no evidence".
    result, meta = run_case(name)
    observation = observe(result, DEFAULT_BOUNDS)
    control = control_view(result, meta, observation)
    assert control.status.value == "ERROR" and control.error_code is ErrorCode.CANCELLED
    assert control.evidence_status.value == "ERROR"
    text = encode_view(observation).decode()
    assert '"code":"CANCELLED"' in text and "cancelled by the caller" in text
    assert "NO_EVIDENCE" not in text and "no evidence" not in text.lower()

"""The STATUS block parser: strict, last block wins, no keyword guessing."""

from __future__ import annotations

from worker.status import parse_status


def block(status: str, **fields: str) -> str:
    lines = ["=== AGENT STATUS ===", f"STATUS: {status}"]
    lines += [f"{key}: {value}" for key, value in fields.items()]
    return "\n".join([*lines, "==================="])


def test_all_fields_are_read() -> None:
    text = "work done\n" + block(
        "wait",
        REASON="needs a human",
        WAIT_FOR="approval",
        RESUME_WHEN="user_approval",
        ESCALATE_TO="opus",
    )
    status = parse_status(text)
    assert status.status == "wait"
    assert status.reason == "needs a human"
    assert status.wait_for == "approval"
    assert status.resume_when == "user_approval"
    assert status.escalate_to == "opus"
    assert status.reason_code is None


def test_last_block_wins() -> None:
    text = block("continue", REASON="first") + "\nmore work\n" + block("SUCCESS", REASON="second")
    status = parse_status(text)
    assert (status.status, status.reason) == ("success", "second")


def test_missing_block_is_continue_with_reason_code_not_a_guess() -> None:
    status = parse_status("Everything is done, success! STATUS: success")
    assert status.status is None
    assert status.reason_code == "NO_STATUS_BLOCK"


def test_unknown_status_is_reported_as_such() -> None:
    status = parse_status(block("finished"))
    assert status.status == "finished"
    assert status.reason_code == "UNKNOWN_STATUS"


def test_block_without_status_field() -> None:
    status = parse_status(block("", REASON="forgot").replace("STATUS: \n", ""))
    assert status.status is None
    assert status.reason_code == "STATUS_FIELD_MISSING"


def test_markdown_decoration_and_unrelated_fields_are_tolerated() -> None:
    text = (
        "```\n=== AGENT STATUS ===\n**STATUS:** failure\nNOTE: ignored\n"
        "REASON: tests fail\n===================\n```"
    )
    status = parse_status(text)
    assert status.status == "failure"
    assert status.reason == "tests fail"


def test_unterminated_block_does_not_count() -> None:
    assert parse_status("=== AGENT STATUS ===\nSTATUS: success\n").reason_code == "NO_STATUS_BLOCK"


def test_crlf_line_ends_are_read() -> None:
    """Agents on Windows end lines with CRLF: the block is found and its fields are clean."""
    text = "done\r\n=== AGENT STATUS ===\r\nSTATUS: success\r\nREASON: tests pass\r\n===\r\n"
    block = parse_status(text)
    assert (block.status, block.reason, block.reason_code) == ("success", "tests pass", None)


def test_keys_and_marker_in_any_case_are_read() -> None:
    text = "=== Agent Status ===\nStatus: Wait\nreason: needs a key\nWait_For: approval\n===\n"
    block = parse_status(text)
    assert (block.status, block.reason, block.wait_for) == ("wait", "needs a key", "approval")

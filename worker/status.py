"""The STATUS block protocol: a strict, pure parser.

    === AGENT STATUS ===
    STATUS: <continue|escalate|wait|success|failure>
    REASON: <text>
    ESCALATE_TO: <mode or model>     (with escalate)
    WAIT_FOR: <what>                 (with wait)
    RESUME_WHEN: <condition>         (with wait)
    ===================

The last complete block in the agent's final text wins; only explicit fields count. There is
no keyword guessing: a missing block is `continue` with reason code NO_STATUS_BLOCK. Line ends
may be CRLF (agents on Windows) and keys any case (`Status:`).
"""

from __future__ import annotations

import re

from worker.models import StatusBlock

STATUSES = ("continue", "escalate", "wait", "success", "failure")
STATUS_INSTRUCTIONS = """\
End your answer with this block, filled in (the last block you write is the one that counts):

=== AGENT STATUS ===
STATUS: <continue|escalate|wait|success|failure>
REASON: <one line: why>
ESCALATE_TO: <stronger mode, only with escalate>
WAIT_FOR: <what you wait for, only with wait>
RESUME_WHEN: <only with wait: user_approval|roosync_response|github_decision|\
intercom_message|time:<ISO 8601>>
===================
"""

# One line for a resumed session whose last answer had no block: its first prompt holds the
# instructions, and this line alone is enough to write a block the parser reads.
STATUS_REMINDER = (
    "Your last answer had no valid STATUS block. End this one with it, each part on a line of "
    "its own: `=== AGENT STATUS ===`, `STATUS: <continue|escalate|wait|success|failure>`, "
    "`REASON: <one line>` (with ESCALATE_TO, WAIT_FOR and RESUME_WHEN as the instructions at "
    "the start of this session say), `===================`."
)

_BLOCK = re.compile(
    r"^[ \t>*`]*=== ?AGENT STATUS ?===[ \t*`]*$(?P<body>.*?)^[ \t>*`]*={3,}[ \t*`]*$",
    re.MULTILINE | re.DOTALL | re.IGNORECASE,
)
_FIELD = re.compile(r"^[ \t>*`-]*(?P<key>[A-Za-z_]+)[ \t*]*:[ \t*]*(?P<value>.*?)[ \t*`]*$")
_FIELDS = {"STATUS", "REASON", "ESCALATE_TO", "WAIT_FOR", "RESUME_WHEN"}


def parse_status(text: str) -> StatusBlock:
    """Parse the last STATUS block of `text`."""
    text = (text or "").replace("\r\n", "\n").replace("\r", "\n")
    blocks = list(_BLOCK.finditer(text))
    if not blocks:
        return StatusBlock(status=None, reason_code="NO_STATUS_BLOCK")
    fields: dict[str, str] = {}
    for line in blocks[-1].group("body").splitlines():
        match = _FIELD.match(line)
        key = match.group("key").upper() if match else ""
        if match and key in _FIELDS:
            fields[key] = match.group("value").strip()
    raw = fields.get("STATUS", "")
    status = raw.split()[0].lower().strip("<>.,;") if raw else ""
    if not status:
        return StatusBlock(
            status=None, reason=fields.get("REASON", ""), reason_code="STATUS_FIELD_MISSING"
        )
    code = None if status in STATUSES else "UNKNOWN_STATUS"
    return StatusBlock(
        status=status,
        reason=fields.get("REASON", ""),
        escalate_to=fields.get("ESCALATE_TO") or None,
        wait_for=fields.get("WAIT_FOR") or None,
        resume_when=fields.get("RESUME_WHEN") or None,
        reason_code=code,
    )

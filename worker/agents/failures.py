"""Infrastructure failures read from an agent CLI's error text: a bad key, an API that is down,
a usage limit, a crash (worker/agents/infra.py names a program that cannot start). Pure
functions over text; the adapters decide when.

The messages name the cause in words for the person who must fix it, e.g.
"Codex could not authenticate: 401 Unauthorized: Incorrect API key provided (HTTP 401)".
"""

from __future__ import annotations

import re

from worker.models import InfraFailure, InfraKind
from worker.process.proc import redact

# "unexpected status 401 Unauthorized" (codex), `"code":401` (the Gemini API's error body),
# "failed with status 503" (Gemini CLI's retry lines), "HTTP 529".
_STATUS = re.compile(r'(?i)(?:unexpected status|with status|status:|"code":|HTTP)\s*(\d{3})\b')
_AUTH_TEXT = re.compile(
    r"(?i)invalid[ _]api[ _]key|incorrect api key|api key not valid|unauthori[sz]ed|"
    r"authentication[ _](?:failed|error)|not logged in|UNAUTHENTICATED"
)
# Codex: "You've hit your usage limit" (openai/codex#3124), "Quota exceeded"; the Gemini API:
# "Quota exceeded for quota metric ...", "You have exhausted your daily quota".
_QUOTA_TEXT = re.compile(
    r"(?i)quota exceeded|exceeded your current quota|insufficient_quota|exhausted your"
    r"(?: daily)? quota|usage limit|hit your limit"
)
_NETWORK_TEXT = re.compile(
    r"(?i)overloaded|service unavailable|connection refused|error sending request|"
    r"stream disconnected|timed out|ECONNREFUSED|ECONNRESET|ETIMEDOUT|fetch failed|UNAVAILABLE"
)
# Retries the CLI made before the worker ends it: the CLI's 3rd retry of an unavailable API
# (issue 11: "say the CLI's 3rd retry"), so a long outage costs seconds, not minutes.
RETRIES_BEFORE_GIVING_UP = 3


def http_status(text: str) -> int | None:
    match = _STATUS.search(text)
    return int(match.group(1)) if match else None


def classify(
    cli: str, text: str, *, status: int | None = None, key_setting: str | None = None
) -> InfraFailure | None:
    """The infrastructure failure an error text describes, or None when it is the task's.
    A key an API echoes back ("Incorrect API key provided: sk-...") is hidden."""
    text = redact(text)
    status = status or http_status(text)
    suffix = f" (HTTP {status})" if status else ""
    if status in (401, 403) or _AUTH_TEXT.search(text):
        return InfraFailure(
            InfraKind.AUTH,
            f"{cli} could not authenticate: {text}{suffix}",
            http_status=status,
            setting=key_setting,
        )
    if _QUOTA_TEXT.search(text):
        return InfraFailure(
            InfraKind.USAGE_LIMIT, f"{cli} hit its usage limit: {text}{suffix}", http_status=status
        )
    if status in (408, 429) or (status or 0) >= 500 or _NETWORK_TEXT.search(text):
        return InfraFailure(
            InfraKind.UNAVAILABLE,
            f"{cli} could not reach the model API: {text}{suffix}",
            http_status=status,
        )
    return None


def crash(cli: str, exit_code: int | None, stderr_tail: str) -> InfraFailure:
    last = last_line(stderr_tail)
    return InfraFailure(
        InfraKind.CLI_CRASH,
        f"{cli} exited with code {exit_code} without a result" + (f": {last}" if last else ""),
    )


def last_line(text: str) -> str:
    """The last non-blank line (of a stderr tail), shortened."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""

"""OpenHands and SWE-agent trajectories read as AgentEvents, for `worker inspect`.

Neither tool prints a stream while it works; both save what happened afterwards:

* **OpenHands** saves a list of events (`tests/runtime/trajs/*.json`, the `history` of each
  line of an evaluation or resolver `output.jsonl`). An action (`"action": "run"`, `"edit"`,
  `"read"`, ...) is a tool call, its observation (`"observation"`, `"cause"` = the action's
  `id`) the result; `"observation": "error"` or a non-zero `exit_code` is a failed result.
  Older resolver histories carry no ids: an observation answers the action before it.
* **mini-swe-agent** (SWE-agent's small sibling) saves `.traj.json`: `{"messages": [...],
  "info": {...}}` in the chat format, the command in an assistant message's `tool_calls` (or
  a ```bash block of its text) and the output in the next `tool` (or `user`) message, which
  opens with `<returncode>N</returncode>`. A user message without one is the harness
  rejecting the answer (a format error).
* **SWE-agent** saves a `.traj` file: `{"trajectory": [{"thought", "action",
  "observation", ...}], "info": {"exit_status", "model_stats"}}`. The first word of an
  action is its tool (`edit`, `open`, `python`, `submit`); SWE-agent records no exit code, so
  a result is a failure when its first line is one of SWE-agent's own error messages, a
  Python traceback or a shell's "command not found".

User messages of either tool (a harness's rejection, a user's correction) become
`EventKind.OTHER` events with `raw_type="user"`: the detectors count repeated ones.
"""

from __future__ import annotations

from worker.supervision.trajectory_openhands import (
    looks_like_openhands,
    looks_like_v1,
    openhands_events,
)
from worker.supervision.trajectory_swe import (
    looks_like_mini,
    looks_like_sweagent,
    mini_events,
    sweagent_events,
)

# The readers live by tool beside this overview: OpenHands in trajectory_openhands.py,
# SWE-agent and mini-swe-agent in trajectory_swe.py.
__all__ = [
    "looks_like_mini",
    "looks_like_openhands",
    "looks_like_sweagent",
    "looks_like_v1",
    "mini_events",
    "openhands_events",
    "sweagent_events",
]

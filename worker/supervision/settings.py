"""Settings of the supervisor (section `[supervision]` of worker.toml).

Defaults come from public agents (Cline, Roo Code, Gemini CLI, OpenCode, OpenHands, SWE-agent,
Magentic-One, Goose) and from the supervisor-loop spec this project started from. Where
no public default exists the number is ours, and the comment says so.

    [supervision]
    enabled = true
    exempt_tools = ["BashOutput", "TaskOutput"]
    [supervision.thresholds.loop]
    warn = 3
    urgent = 5
    [supervision.tools.Bash.loop]
    warn = 4
    [supervision.context_windows]
    "claude-opus-4-6" = 200000
"""

# Annotations evaluated as written, not postponed: worker/config.py says why.

from typing import Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    field_validator,
    model_validator,
)

PaceLevel = Literal["primary", "alternate", "contingent", "emergency"]
PACE_LEVELS: tuple[PaceLevel, ...] = ("primary", "alternate", "contingent", "emergency")

# The anomaly kinds; each has its own cooldown. Cascades are split by failure class because
# Cline and Roo Code count permission denials apart; infrastructure errors
# (network, API, disk) get the same treatment: they are not the agent's reasoning failing.
KINDS = (
    "stall",
    "loop",
    "repeated_error",
    "edit_failure",
    "repeated_message",
    "oscillation",
    "cycle",
    "cascade",
    "permission",
    "infrastructure",
    "cli_error",
    "context",
    "pace",
)


class Threshold(BaseModel):
    """A streak length that earns a nudge (`warn`) and one that is urgent (`urgent`).

    An urgent loop-like anomaly seen during an iteration stops the agent at the next radio
    check (when `stop_on_urgent`); None means the anomaly never becomes urgent.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True, allow_inf_nan=False)  # config.py

    warn: int = Field(ge=2)
    urgent: int | None = Field(None, ge=2)

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.urgent is not None and self.urgent <= self.warn:
            raise ValueError("urgent must be greater than warn")
        return self


def _thresholds() -> dict[str, dict[str, int]]:
    # Data, validated as part of the settings (see worker/config.py).
    return {
        # identical tool call: nudge at 3, escalate at 5 (Cline 3/5, Roo 3, OpenCode 3;
        # Gemini CLI halts at 5).
        "loop": {"warn": 3, "urgent": 5},
        # same call failing with the same error: 3 (OpenHands; SWE-agent requeries 3). The
        # urgent point is ours: the nudge had as many failures again to work.
        "repeated_error": {"warn": 3, "urgent": 6},
        # failed edits of one file in a row, whatever their arguments (a read of the file
        # between them included): ours (issue 41). SWE-agent's demonstrations retry a rejected
        # edit up to 3 times and get it right; a fourth failure is a nudge, a sixth a stop.
        "edit_failure": {"warn": 4, "urgent": 6},
        # identical assistant messages (monologue): 3 (OpenHands); urgent doubled (ours).
        "repeated_message": {"warn": 3, "urgent": 6},
        # A-B-A-B-A-B alternation: 6 (OpenHands); urgent is ours (10 = two more cycles).
        "oscillation": {"warn": 6, "urgent": 10},
        # the same CLI-level error (no tool ever ran) in consecutive sessions: nudge at 2,
        # urgent at 3, the "same error 3 times" of OpenHands and SWE-agent's 3 requeries.
        "cli_error": {"warn": 2, "urgent": 3},
        # the same 2 to `cycle_longest` steps (call, target, result with numbers blurred)
        # coming round again: ours, 3 rounds to nudge and 4 to stop; when a step of it fails
        # the same way each round, 2 rounds to nudge and the first step of a third to stop.
        # A file change or a wait starts the count afresh.
        "cycle": {"warn": 3, "urgent": 4},
    }


class ToolSettings(BaseModel):
    """Per-tool overrides: `[supervision.tools.<ToolName>]`."""

    model_config = ConfigDict(extra="forbid", defer_build=True, allow_inf_nan=False)  # config.py

    exempt: bool = False  # a polling tool: repeating it is its job
    loop: Threshold | None = None
    repeated_error: Threshold | None = None


class PaceSettings(BaseModel):
    """The escalation ladder: primary, alternate, contingent, emergency.

    The level is the highest one reached by either count: mode escalations in this task, or
    anomaly episodes seen so far. Guidance texts are the "PACE plan" of the spec's role
    profile; levels from `inject_from` up are injected (the spec acts on contingent and up).
    """

    model_config = ConfigDict(extra="forbid", defer_build=True, allow_inf_nan=False)  # config.py

    escalations: dict[str, int] = Field(
        default_factory=lambda: {"alternate": 1, "contingent": 2, "emergency": 3}
    )
    # Ours: two anomalies mean the first approach is in trouble, four that the second one is,
    # eight that steering is not working at all.
    anomalies: dict[str, int] = Field(
        default_factory=lambda: {"alternate": 2, "contingent": 4, "emergency": 8}
    )
    inject_from: PaceLevel = "contingent"
    guidance: dict[str, str] = Field(
        default_factory=lambda: {
            "primary": "Continue with your primary approach.",
            "alternate": "Your primary approach is not working; switch to your alternate one.",
            "contingent": (
                "Your approaches so far have failed; use a fundamentally different method, "
                "or ask for guidance with STATUS wait."
            ),
            "emergency": (
                "Stop now, keep your partial work, and report what you accomplished and where "
                "you got stuck with STATUS failure."
            ),
        }
    )

    @field_validator("escalations", "anomalies", "guidance")
    @classmethod
    def _known_levels(cls, value: dict[str, object]) -> dict[str, object]:
        unknown = sorted(set(value) - set(PACE_LEVELS))
        if unknown:
            raise ValueError(f"unknown PACE level(s) {unknown}; use {list(PACE_LEVELS)}")
        return value


class SupervisionSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True, allow_inf_nan=False)  # config.py

    enabled: bool = True  # the global switch: off = nothing checked, written or injected
    thresholds: dict[str, Threshold] = Field(default_factory=_thresholds, validate_default=True)
    tools: dict[str, ToolSettings] = Field(default_factory=dict)
    # Claude Code's polling tools: reading a background shell's output again is not a loop.
    exempt_tools: list[str] = Field(default_factory=lambda: ["BashOutput", "TaskOutput"])
    # Keys whose values change on every call without changing what the call does; Claude
    # Code's Bash `description` is prose the model rewrites each time.
    volatile_keys: list[str] = Field(
        default_factory=lambda: [
            "id",
            "tool_use_id",
            "call_id",
            "request_id",
            "uuid",
            "timestamp",
            "nonce",
            "description",
        ]
    )
    # Several different tools failing: 3 distinct in the last 5 results (supervisor spec).
    cascade_distinct: int = Field(3, ge=2)
    cascade_window: int = Field(5, ge=2)
    # A-B-A-B with both sides failing warns at 4 (OpenHands).
    failing_alternation: int = Field(4, ge=4)
    # The longest cycle looked for, in steps (ours; the loop check covers one step).
    cycle_longest: int = Field(4, ge=2, le=8)
    # Turns without progress: 3 (Magentic-One), counted per iteration, decremented on
    # progress rather than reset.
    stall_iterations: int = Field(3, ge=1)
    # Within one transcript, agent turns without progress: no new call, no new result and no
    # file change. No public default: ours, generous because a slow test or CI wait is normal.
    stall_turns: int = Field(30, ge=2)
    progress_tools: list[str] = Field(
        default_factory=lambda: [
            "Edit",
            "MultiEdit",
            "Write",
            "NotebookEdit",  # Claude Code
            "file_change",
            "apply_patch",  # Codex
            "replace",
            "write_file",  # Gemini CLI
        ]
    )
    min_message_chars: int = Field(40, ge=1)  # ours: "Let me check." thrice is not a monologue
    # Context fill: warn 0.80, urgent 0.90 (Goose, Cline; Roo Code keeps a 10% buffer).
    context_warn: float = Field(0.80, gt=0, lt=1)
    context_urgent: float = Field(0.90, gt=0, le=1)
    # ... and only when the window holds no more than this many turns at the rate the context
    # has been growing (ours: a fill that leaves room for the rest of the work is no alarm,
    # whatever the window's size).
    context_warn_turns: PositiveInt = 10
    context_urgent_turns: PositiveInt = 3
    default_context_window: PositiveInt = 200_000
    # Model-name substring -> window; the first match wins. "[1m]" marks Claude's 1M beta.
    context_windows: dict[str, int] = Field(default_factory=lambda: {"[1m]": 1_000_000})
    # Cooldown per anomaly type: 3 turns; re-arm when the streak grows; emergencies exempt.
    cooldown_turns: NonNegativeInt = 3
    radio_check_events: int = Field(10, ge=1)  # ours: a 5-call loop is ~10 events
    stop_on_urgent: bool = True  # cut a tight loop short instead of waiting for the timeout
    max_steering_lines: int = Field(3, ge=1)  # the spec: minimal tokens, maximum signal
    actions: dict[str, str] = Field(default_factory=dict)  # kind -> replacement action text
    pace: PaceSettings = Field(default_factory=dict, validate_default=True)
    reports: bool = True  # write <reports>/<machine-id>_latest.json at every iteration
    stale_after_s: PositiveFloat | None = None  # None: twice the iteration timeout

    @field_validator("thresholds", mode="before")
    @classmethod
    def _merge_thresholds(cls, value: Any) -> Any:
        """A worker.toml naming one kind keeps the defaults of the others."""
        if not isinstance(value, dict):
            return value  # not a table: pydantic says so
        defaults = _thresholds()
        unknown = sorted(set(value) - set(defaults))
        if unknown:
            raise ValueError(f"unknown streak kind(s) {unknown}; use {sorted(defaults)}")
        return {**defaults, **value}

    @field_validator("actions")
    @classmethod
    def _known_kinds(cls, value: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(value) - set(KINDS))
        if unknown:
            raise ValueError(f"unknown anomaly kind(s) {unknown}; use {list(KINDS)}")
        return value

    @model_validator(mode="after")
    def _context_order(self) -> Self:
        if self.context_urgent <= self.context_warn:
            raise ValueError("context_urgent must be greater than context_warn")
        return self

    def threshold(self, kind: str, tool: str | None = None) -> Threshold | None:
        """The threshold of a kind, a tool's own override first."""
        if tool is not None and (override := self.tools.get(tool)) is not None:
            own = getattr(override, kind, None)
            if isinstance(own, Threshold):
                return own
        return self.thresholds.get(kind)

    def is_exempt(self, tool: str | None) -> bool:
        if tool is None:
            return False
        override = self.tools.get(tool)
        return tool in self.exempt_tools or (override is not None and override.exempt)

    def context_window(self, model: str | None) -> int:
        for fragment, window in self.context_windows.items():
            if model and fragment in model:
                return window
        return self.default_context_window

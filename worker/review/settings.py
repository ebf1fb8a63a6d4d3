"""Settings of reviewers and the knowledge store (section `[review]`).

The reviewers are off until configured: each run calls a model beyond the task's own agent
(`[review] reviewers = true` turns them all on, `[review.style] enabled = true` one of them).
The knowledge and directives sections of the prompts cost no call and stay on.

Defaults come from the supervisor-layer spec this project started from:
style every 5 tasks, knowledge every 3, design at milestones; urgency weights +0.3 / +1.0 /
+0.2 with a threshold of 1.0; directives age out after 15 tasks; at most 10 pending cleanup
directives; about 2k tokens of knowledge in a prompt.
"""

# Annotations evaluated as written, not postponed: worker/config.py says why.

from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    model_validator,
)


class ReviewerSettings(BaseModel):
    """One reviewer: whether it runs, how often, and through which agent and model."""

    model_config = ConfigDict(extra="forbid", defer_build=True, allow_inf_nan=False)  # config.py

    enabled: bool | None = None  # None: as `[review] reviewers` says
    interval: NonNegativeInt = 5  # finished tasks between runs; 0 = only on milestones/urgency
    on_milestone: bool = False  # run at an abort or an escalation
    # A mode of the modes file to run in (its agent and model); None: Claude with `model`.
    mode: str | None = None
    model: str = "sonnet"  # the spec's supervisors are Sonnet-class models
    max_budget_usd: PositiveFloat | None = 0.5


class UrgencyWeights(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True, allow_inf_nan=False)  # config.py

    verify_failed: NonNegativeFloat = 0.3  # spec: QA failure +0.3
    abort: NonNegativeFloat = 1.0  # spec: task abort +1.0 (immediate)
    churn: NonNegativeFloat = 0.2  # spec: high carry-forward churn +0.2
    threshold: PositiveFloat = 1.0  # spec: supervisors run at >= 1.0, then it resets


# Each reviewer's own defaults, kept when a user sets only some of its keys.
REVIEWER_DEFAULTS: dict[str, dict[str, Any]] = {
    "style": {"interval": 5},  # spec: every N completed tasks (default 5)
    "design": {"interval": 0, "on_milestone": True},  # spec: at milestones, re-plans, aborts
    "knowledge": {"interval": 3},  # spec: the internaliser, every 3 tasks
}


class ReviewSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True, allow_inf_nan=False)  # config.py

    enabled: bool = True  # false: no knowledge, no directives, no reviewers
    # The reviewer agents: off until asked, since they spend beyond the tasks' own agents.
    reviewers: bool = False
    knowledge_dir: Path = Path("docs/knowledge")  # relative to the workspace
    style: ReviewerSettings = Field(
        default_factory=lambda: REVIEWER_DEFAULTS["style"], validate_default=True
    )
    design: ReviewerSettings = Field(
        default_factory=lambda: REVIEWER_DEFAULTS["design"], validate_default=True
    )
    knowledge: ReviewerSettings = Field(
        default_factory=lambda: REVIEWER_DEFAULTS["knowledge"], validate_default=True
    )
    urgency: UrgencyWeights = Field(default_factory=dict, validate_default=True)
    # Heavy churn: a task whose diff changes this many lines, or that took this many iterations.
    churn_lines: PositiveInt = 400
    churn_iterations: PositiveInt = 6
    token_budget: PositiveInt = 2000  # spec: ~2k tokens for knowledge injection
    directive_max_age: PositiveInt = 15  # spec: dropped after 15 task completions
    cleanup_cap: PositiveInt = 10  # spec: at most 10 pending cleanup directives
    max_directives_in_prompt: PositiveInt = 20
    directive_token_budget: PositiveInt = 1000  # beside the knowledge's, for the directives
    establish_after: PositiveInt = 3  # successful uses before provisional -> established
    # Convergence: a run with at most this many findings new since the previous run converges.
    converging_max_new: NonNegativeInt = 1
    max_interval: PositiveInt = 80  # cap for the doubled interval
    recent_tasks: PositiveInt = 10  # most tasks shown to one reviewer run
    timeout_s: PositiveFloat = 900.0
    diff_chars: NonNegativeInt = 3000  # diff excerpt kept per task for reviewers

    @model_validator(mode="before")
    @classmethod
    def _keep_reviewer_defaults(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for name, defaults in REVIEWER_DEFAULTS.items():
                if isinstance(data.get(name), dict):
                    data[name] = {**defaults, **data[name]}
        return data

    def reviewer(self, name: str) -> ReviewerSettings:
        value = getattr(self, name)
        assert isinstance(value, ReviewerSettings)
        return value

    def runs(self, name: str) -> bool:
        """Whether reviewer `name` may run: its own `enabled` when set, else `reviewers`."""
        own = self.reviewer(name).enabled
        return self.enabled and (self.reviewers if own is None else own)


def reviewers_line(cfg: ReviewSettings) -> str:
    """The reviewers' spend in one line (the dry run and `worker doctor` show it)."""
    on = [name for name in REVIEWER_DEFAULTS if cfg.runs(name)]
    if not on:
        return (
            "reviewers: off (no model is called beyond the task's agent; "
            "`[review] reviewers = true` turns them on)"
        )
    caps = ", ".join(_cap(name, cfg.reviewer(name).max_budget_usd) for name in on)
    return f"reviewers: on between tasks, when due; a call's spend: {caps}"


def _cap(name: str, usd: float | None) -> str:
    return f"{name} at most ${usd:.2f}" if usd else f"{name} uncapped"

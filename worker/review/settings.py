"""Settings of reviewers and the knowledge store (section `[review]`).

Defaults come from the supervisor-layer spec this project started from:
style every 5 tasks, knowledge every 3, design at milestones; urgency weights +0.3 / +1.0 /
+0.2 with a threshold of 1.0; directives age out after 15 tasks; at most 10 pending cleanup
directives; about 2k tokens of knowledge in a prompt.
"""

# Annotations evaluated as written, not postponed: worker/config.py says why.

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class ReviewerSettings(BaseModel):
    """One reviewer: whether it runs, how often, and through which agent and model."""

    model_config = ConfigDict(extra="forbid", defer_build=True)  # see worker/config.py

    enabled: bool = True
    interval: int = Field(
        default=5, ge=0
    )  # finished tasks between runs; 0 = only on milestones/urgency
    on_milestone: bool = False  # run at an abort or an escalation
    # A mode of the modes file to run in (its agent and model); None: Claude with `model`.
    mode: str | None = None
    model: str = "sonnet"  # the spec's supervisors are Sonnet-class models
    max_budget_usd: float | None = Field(default=0.5, gt=0)


class UrgencyWeights(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)  # see worker/config.py

    verify_failed: float = Field(default=0.3, ge=0)  # spec: QA failure +0.3
    abort: float = Field(default=1.0, ge=0)  # spec: task abort +1.0 (immediate)
    churn: float = Field(default=0.2, ge=0)  # spec: high carry-forward churn +0.2
    threshold: float = Field(default=1.0, gt=0)  # spec: supervisors run at >= 1.0, then it resets


# Each reviewer's own defaults, kept when a user sets only some of its keys.
REVIEWER_DEFAULTS: dict[str, dict[str, Any]] = {
    "style": {"interval": 5},  # spec: every N completed tasks (default 5)
    "design": {"interval": 0, "on_milestone": True},  # spec: at milestones, re-plans, aborts
    "knowledge": {"interval": 3},  # spec: the internaliser, every 3 tasks
}


class ReviewSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)  # see worker/config.py

    enabled: bool = True
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
    churn_lines: int = Field(default=400, gt=0)
    churn_iterations: int = Field(default=6, gt=0)
    token_budget: int = Field(default=2000, gt=0)  # spec: ~2k tokens for knowledge injection
    directive_max_age: int = Field(default=15, gt=0)  # spec: dropped after 15 task completions
    cleanup_cap: int = Field(default=10, gt=0)  # spec: at most 10 pending cleanup directives
    max_directives_in_prompt: int = Field(default=20, gt=0)
    establish_after: int = Field(
        default=3, gt=0
    )  # successful uses before provisional -> established
    # Convergence: a run with at most this many findings new since the previous run converges.
    converging_max_new: int = Field(default=1, ge=0)
    max_interval: int = Field(default=80, gt=0)  # cap for the doubled interval
    recent_tasks: int = Field(default=10, gt=0)  # most tasks shown to one reviewer run
    timeout_s: float = Field(default=900.0, gt=0)
    diff_chars: int = Field(default=3000, ge=0)  # diff excerpt kept per task for reviewers

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

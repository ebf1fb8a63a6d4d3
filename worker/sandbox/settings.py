"""Settings of the agent's sandbox (section `[sandbox]`): the operating system's limits on what
the agent CLI, and every process it starts, may read, write and reach (worker/sandbox/box.py)."""

# Annotations evaluated as written, not postponed: worker/config.py says why.

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

# Hosts a task commonly needs besides the model's API: the package registries and the git
# host, read-only without a token (which the agent never gets: secrets.agent_env).
DEFAULT_ALLOW_HOSTS = [
    "github.com",
    "codeload.github.com",
    "objects.githubusercontent.com",
    "registry.npmjs.org",
    "pypi.org",
    "files.pythonhosted.org",
]


class SandboxSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)  # see worker/config.py

    # off: no sandbox; auto: one where a runtime is installed, a warning where not;
    # required: no agent starts without one (exit 78, nothing claimed).
    mode: Literal["off", "auto", "required"] = "auto"
    # The least a task from GitHub issues (text by other people) gets, whatever `mode` says:
    # `required` here with `auto` above boxes every task and refuses GitHub's without a box.
    untrusted_mode: Literal["off", "auto", "required"] = "auto"
    # Which runtime: auto is the sandbox runtime (`srt`) where installed, else bubblewrap.
    runtime: Literal["auto", "srt", "bwrap"] = "auto"
    srt_bin: str = "srt"
    bwrap_bin: str = "bwrap"
    # Hosts the agent may reach besides its model's API ("host", "*.host" or "host:port").
    allow_hosts: list[str] = DEFAULT_ALLOW_HOSTS
    # More folders or files the agent may not read, and more it may write.
    deny_read: list[Path] = []
    allow_write: list[Path] = []
    # Variables the agent gets beside its own API's, PATH, HOME, locale and proxy (names, or
    # `PREFIX_*`): the task's (`AWS_*` for Claude on Bedrock, a package registry's URL). Never
    # one of worker's secrets, whatever this says.
    pass_env: list[str] = []

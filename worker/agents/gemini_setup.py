"""What in Gemini CLI's own settings would stop a headless run before it starts.

Read from Gemini CLI 0.61's source (packages/cli/src/config/auth.ts,
validateNonInterActiveAuth.ts, packages/core/src/utils/paths.ts and trustedFolders.ts):

- the auth type is `security.auth.selectedType` of the settings files, else taken from the
  environment: GOOGLE_GENAI_USE_GCA=true, GOOGLE_GENAI_USE_VERTEXAI=true, GOOGLE_GEMINI_BASE_URL
  (the `gateway` type, which a headless run refuses: "Invalid auth method selected."), then
  GEMINI_API_KEY. Without one, every run exits 41.
- `gemini-api-key` needs GEMINI_API_KEY (or a key in the system keychain); `vertex-ai` needs
  GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION, or GOOGLE_API_KEY.
- GEMINI_RESTRICTED_MODE=true makes every folder untrusted, even with `--skip-trust`: exit 55.
- settings live in `$GEMINI_CLI_HOME/.gemini/settings.json` (else the home folder's), then the
  workspace's `.gemini/settings.json`, which wins.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_COMMENT = re.compile(r'("(?:\\.|[^"\\])*")|//[^\n]*|/\*.*?\*/', re.S)


@dataclass(frozen=True)
class Blocker:
    fatal: bool  # True: every run fails; False: it may fail
    message: str


def settings_files(env: Mapping[str, str], workspace: Path) -> list[Path]:
    home = Path(env.get("GEMINI_CLI_HOME") or env.get("HOME") or Path.home())
    return [home / ".gemini" / "settings.json", workspace / ".gemini" / "settings.json"]


def selected_auth(files: list[Path]) -> tuple[str | None, list[str]]:
    """`security.auth.selectedType` (the last file that sets it wins), and unreadable files."""
    selected: str | None = None
    problems: list[str] = []
    for path in files:
        if not path.is_file():
            continue
        try:
            data = _json_with_comments(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            problems.append(f"{path}: cannot read it ({exc})")
            continue
        auth = _get(data, "security", "auth", "selectedType")
        if isinstance(auth, str):
            selected = auth
    return selected, problems


def blockers(env: Mapping[str, str], workspace: Path) -> list[Blocker]:
    """Everything in the settings and the environment that would stop `gemini -p`."""
    found: list[Blocker] = []
    if env.get("GEMINI_RESTRICTED_MODE") == "true":
        found.append(
            Blocker(
                True,
                "GEMINI_RESTRICTED_MODE=true makes every folder untrusted, even with "
                "--skip-trust (exit 55): unset it for worker's runs",
            )
        )
    selected, problems = selected_auth(settings_files(env, workspace))
    found += [Blocker(False, problem) for problem in problems]
    auth = selected or _auth_from_env(env)
    if auth is None:
        found.append(
            Blocker(
                True,
                "Gemini CLI has no auth method (exit 41): set GEMINI_API_KEY, or "
                "security.auth.selectedType in ~/.gemini/settings.json",
            )
        )
    elif auth == "gateway":
        found.append(
            Blocker(
                True,
                "GOOGLE_GEMINI_BASE_URL without security.auth.selectedType picks the `gateway` "
                "auth type, which a headless run refuses: set selectedType to gemini-api-key",
            )
        )
    elif auth == "gemini-api-key" and not env.get("GEMINI_API_KEY"):
        found.append(
            Blocker(
                False,
                "auth type gemini-api-key but GEMINI_API_KEY is not set (fine only if the key "
                "is in the system keychain)",
            )
        )
    elif auth == "vertex-ai" and not (
        env.get("GOOGLE_API_KEY")
        or (env.get("GOOGLE_CLOUD_PROJECT") and env.get("GOOGLE_CLOUD_LOCATION"))
    ):
        found.append(
            Blocker(
                True,
                "auth type vertex-ai needs GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION, "
                "or GOOGLE_API_KEY",
            )
        )
    return found


def _auth_from_env(env: Mapping[str, str]) -> str | None:
    if env.get("GOOGLE_GENAI_USE_GCA") == "true":
        return "oauth-personal"
    if env.get("GOOGLE_GENAI_USE_VERTEXAI") == "true":
        return "vertex-ai"
    if env.get("GOOGLE_GEMINI_BASE_URL"):
        return "gateway"
    if env.get("GEMINI_API_KEY"):
        return "gemini-api-key"
    if env.get("CLOUD_SHELL") == "true" or env.get("GEMINI_CLI_USE_COMPUTE_ADC") == "true":
        return "compute-default-credentials"
    return None


def _json_with_comments(text: str) -> Any:
    """Gemini CLI's settings allow // and /* */ comments (it strips them before parsing)."""
    return json.loads(_COMMENT.sub(lambda m: m.group(1) or "", text))


def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data

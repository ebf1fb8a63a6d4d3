"""What marks a secret, and the one way worker hides one.

Every place worker writes or shows text an agent or an operator's environment could have put a
secret in (logs, the database, the dashboard, notifications, the schedules it prints) masks it
with `masker`/`mask`; every process worker starts gets an environment built here: its own
children (`child_env` in worker/process/proc.py) lose worker's tokens, and an agent in the box
gets only what `agent_env` allows. tests/test_secrets_one_list.py drives each consumer from the
names and shapes declared here, so a word added here is hidden everywhere.

Pure: `re` and `json` only, below every layer that uses it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

# Words that, in a variable's name, mark its value as a secret (whatever its shape).
NAME_WORDS = (
    "token",
    "secret",
    "password",
    "passwd",
    "api_key",
    "apikey",
    "credential",
    "private",
    "database_url",
    "dsn",
)
_WORDS = "|".join(word.replace("_", "_?") for word in NAME_WORDS)
_NAME = f"(?i){_WORDS}"
# ...but where such a variable names a place (HF_TOKEN_PATH, SECRETS_DIR), its value is no secret.
_PLACE = r"(?i)_(path|file|dir)$"
# Token shapes, hidden wherever they appear: GitHub's tokens, Anthropic's and OpenAI's keys
# (`sk-proj-...` has underscores), Google's API keys, AWS access key ids, a PEM private key
# (raw or JSON-escaped, as an iteration log stores it).
SHAPES = {
    "github": r"gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}",
    "openai/anthropic": r"sk-[A-Za-z0-9_-]{20,}",
    "google": r"AIza[A-Za-z0-9_-]{30,}",
    "aws key id": r"(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])",
    "pem private key": (
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----(?:.|\n)*?-----END [A-Z ]*PRIVATE KEY-----"
    ),
}
_SHAPES = "|".join(f"(?:{shape})" for shape in SHAPES.values())
# `scheme://user:password@host` -> `scheme://user:***@host`; also `password=...` in a DSN.
# Each pattern is compiled at its first use (`re`'s own cache): importing this costs nothing,
# and a run with nothing to do compiles none.
_URL_PASSWORD = r"(?i)(?P<head>[a-z][a-z0-9+.-]*://[^:/@\s]*:)(?P<pw>[^@\s]*)(?=@)"
_DSN_PASSWORD = r"(?i)\b(password\s*=\s*)('[^']*'|\S+)"
# `name=value` where the name says secret (a command line, a dashboard's text).
_KEY_VALUE = rf"(?i)\b([\w.-]*(?:{_WORDS})[\w.-]*)=(?!\*\*\*)\S+"
MIN_LENGTH = 8  # a shorter value would mask ordinary words

# Variables that hold worker's secrets (its tokens, the databases' passwords and URLs) whatever
# their name says: never in a child of worker's. And the doors a process of the same user is
# let in by: never in an agent's environment.
WORKER_SECRETS = (
    "WORKER_GITHUB_TOKEN",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GH_ENTERPRISE_TOKEN",
    "GITHUB_ENTERPRISE_TOKEN",
    "WORKER_GIT_TOKEN",
    "WORKER_FLEET__DATABASE_URL",
    "WORKER_DASHBOARD_TOKEN",  # the dashboard's: the agent must never approve its own wait
    "DATABASE_URL",
    "PGPASSWORD",
    "PGPASSFILE",
    "PGSERVICEFILE",
)
USER_DOORS = ("SSH_AUTH_SOCK", "SSH_AGENT_PID", "GPG_AGENT_INFO", "DBUS_SESSION_BUS_ADDRESS")


# Variables a loaded setting names as holding a secret (`remember`): hidden and kept from
# children like the others, in this process, from then on.
_REMEMBERED: set[str] = set()


def remember(names: Iterable[str]) -> None:
    """Treat these variables as secrets from now on (the settings name them: `*_env`)."""
    _REMEMBERED.update(name for name in names if name)


def remembered() -> frozenset[str]:
    return frozenset(_REMEMBERED)


def is_secret_name(name: str) -> bool:
    """Whether a variable's name says its value is a secret."""
    return bool(re.search(_NAME, name)) and not re.search(_PLACE, name)


def has_url_password(value: str) -> bool:
    return any(match["pw"] for match in re.finditer(_URL_PASSWORD, value))


def redact_url(text: str) -> str:
    """Hide the password of every URL (or `password=` DSN part) in a text."""
    text = re.sub(_URL_PASSWORD, lambda m: m["head"] + "***", text)
    return re.sub(_DSN_PASSWORD, lambda m: m.group(1) + "***", text)


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """The texts to hide: the values of the variables whose name says secret (or that a
    setting names: `remember`), each in the forms it is seen in (each line of a multi-line
    key, JSON-escaped), and the password of every URL in the environment; longest first."""
    env = os.environ if env is None else env
    found: set[str] = set()
    for name, value in env.items():
        if name in _REMEMBERED or is_secret_name(name):
            found |= _forms(value)
        if "://" in value:
            for match in re.finditer(_URL_PASSWORD, value):
                found |= _forms(match["pw"])
    return sorted((v for v in found if len(v) >= MIN_LENGTH), key=len, reverse=True)


def _forms(value: str) -> set[str]:
    forms = {value, value.strip(), json.dumps(value)[1:-1], json.dumps(value.strip())[1:-1]}
    if "\n" in value.strip():
        forms |= {line.strip() for line in value.splitlines()}
    return forms


def masker(
    env: Mapping[str, str] | None = None,
    *,
    extra: Iterable[str] = (),
    key_value: bool = False,
) -> Callable[[str], str]:
    """A function that hides the secrets of `env` (the environment now), `extra` texts and
    every token shape, URL password and (`key_value`) `name=value` secret in a text. The
    values are looked up once: cheap enough for every line of an agent's output."""
    values = sorted({*secret_values(env), *(e for e in extra if e)}, key=len, reverse=True)
    shapes, key_values = re.compile(_SHAPES), re.compile(_KEY_VALUE)

    def hide(text: str) -> str:
        for value in values:
            if value in text:
                text = text.replace(value, "***")
        if "://" in text or "assword" in text or "ASSWORD" in text:
            text = redact_url(text)
        if key_value:
            text = key_values.sub(lambda m: f"{m.group(1)}=***", text)
        return shapes.sub("***", text)

    return hide


def mask(text: str) -> str:
    """`text` with every secret worker knows of hidden (a one-off text: a command line, an
    error, a notification)."""
    return masker(key_value=True)(text)


def mask_all(value: Any, hide: Callable[[str], str]) -> Any:
    """Every string in a JSON-like value passed through `hide`."""
    if isinstance(value, str):
        return hide(value)
    if isinstance(value, dict):
        return {key: mask_all(item, hide) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [mask_all(item, hide) for item in value]
    return value


def variables_named_by(*models: Any) -> set[str]:
    """The environment variables settings name as holding a secret: every `*_env` field (the
    Telegram bot's `token_env`, ...) of the given pydantic models and the models inside them,
    so that a new such setting is a secret without another list to update."""
    return _named_by(models, lambda field: field.endswith("_env"))


def files_named_by(*models: Any) -> set[str]:
    """The files settings name as holding a secret: every `*_file` field whose name says
    secret (`token_file`, `password_file`), in the models and the models inside them."""
    return _named_by(
        models, lambda field: field.endswith("_file") and bool(re.search(_NAME, field))
    )


def _named_by(models: Iterable[Any], wanted: Callable[[str], bool]) -> set[str]:
    found: set[str] = set()
    for model in models:
        for field in getattr(type(model), "model_fields", {}):
            value = getattr(model, field, None)
            if wanted(field) and isinstance(value, str | os.PathLike) and str(value):
                found.add(str(value))
            elif hasattr(type(value), "model_fields"):
                found |= _named_by([value], wanted)
    return found


# What an agent's environment is made of (`agent_env`): the system's, its locale and
# terminal, the proxy it must go through (and the certificates a proxy needs), the project's
# toolchain, its own API.
SYSTEM = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TZ", "TERM", "COLORTERM", "NO_COLOR")
LOCALE = ("LANG", "LANGUAGE", "LC_*")
PROXY = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
)
# Where the project's toolchain is (a build or a test the agent runs needs them, and their
# defaults would be wrong): a secret among them (`npm_config__authToken`) stays out.
TOOLCHAIN = (
    "JAVA_HOME",
    "GOPATH",
    "GOROOT",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "PYENV_ROOT",
    "PYENV_VERSION",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "NVM_DIR",
    "NODE_PATH",
    "npm_config_*",
)
# Each agent CLI's own variables (its key, base URL, model, settings folder), by adapter: a
# name with the provider's in it (`*OPENAI*`: Codex's custom providers name their key
# variable, e.g. AZURE_OPENAI_API_KEY), or the CLI's prefix; Claude Code's IS_SANDBOX (it
# allows bypassPermissions as root in a sandbox). A `command` agent (aider and the like) may
# speak to any of these APIs.
AGENT_API: dict[str, tuple[str, ...]] = {
    "claude": ("*ANTHROPIC*", "CLAUDE_*", "IS_SANDBOX"),
    "codex": ("*OPENAI*", "CODEX_*"),
    "gemini": ("*GEMINI*", "GOOGLE_*"),
}
AGENT_API["command"] = tuple(name for names in AGENT_API.values() for name in names)


def _matches(name: str, patterns: Iterable[str]) -> bool:
    """`name` is one of `patterns`: exact, `PREFIX_*` or `*PART*`."""
    return any(
        (p.strip("*") in name)
        if p.startswith("*")
        else name.startswith(p[:-1])
        if p.endswith("*")
        else name == p
        for p in patterns
    )


def agent_env(
    agent: str,
    env: Mapping[str, str] | None = None,
    *,
    passed: Iterable[str] = (),
    refused: Iterable[str] = (),
) -> dict[str, str]:
    """An agent's environment by allow-list: the system's, locale, proxy, toolchain (none that
    says secret), the agent's own API variables and `passed` (names or `PREFIX_*`: the
    task's, `[sandbox] pass_env`), and nothing else. Never one of worker's secrets, a
    variable in `refused` (those its settings name), a way in as the same user (ssh-agent,
    D-Bus), whatever `passed` says."""
    env = os.environ if env is None else env
    general = (*SYSTEM, *LOCALE, *PROXY, *TOOLCHAIN)
    own = (*AGENT_API.get(agent, ()), *passed)
    out = set(WORKER_SECRETS) | set(USER_DOORS) | set(refused)
    return {
        name: value
        for name, value in env.items()
        if name not in out
        and not name.startswith("WORKER_")
        and (_matches(name, own) or (_matches(name, general) and not is_secret_name(name)))
    }

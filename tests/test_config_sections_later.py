"""The sections of the settings a dry run and `status` never read (supervision, review,
daemon, fleet, retention, notify) are made at their first use; a bad value in one of them
still fails the load, with the message one model of all the settings gave."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from worker.config import LAZY_SECTIONS, Settings, load_settings, section_model
from worker.errors import ConfigError


def _whole() -> type[BaseModel]:
    """The settings as one model, every section a field validated with the rest (as before
    the sections were made at their first use): the reference for the errors."""
    fields: dict[str, Any] = {
        name: (field.annotation, field) for name, field in Settings.model_fields.items()
    }
    for name in LAZY_SECTIONS:
        fields[name] = (section_model(name), Field(default_factory=dict, validate_default=True))
    return create_model("Whole", __config__=ConfigDict(extra="forbid"), **fields)


def _as_one_model(workspace: Path, data: dict[str, Any]) -> set[str]:
    """Each error of the one model as the load words it: `key: message`, or, for a key that
    is no setting, `key` is not a setting."""
    try:
        _whole().model_validate({**data, "workspace": workspace})
    except ValidationError as exc:
        return {
            f"`{'.'.join(map(str, e['loc']))}` is not a setting"
            if e["type"] == "extra_forbidden"
            else f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
            for e in exc.errors()
        }
    raise AssertionError("the reference model took the bad settings")


@pytest.mark.parametrize(
    ("toml", "data"),
    [
        (
            "lease_seconds = 0\n[supervision]\nbogus = 1\n[daemon]\ninterval_s = -1\n",
            {"lease_seconds": 0, "supervision": {"bogus": 1}, "daemon": {"interval_s": -1}},
        ),
        ("[notify]\ntelegram = 3\n", {"notify": {"telegram": 3}}),
        ("retention = 3\n", {"retention": 3}),
        (
            "[fleet]\nheartbeat_s = 'soon'\n[review]\nnope = true\n[github]\nmax_issues = 0\n",
            {
                "fleet": {"heartbeat_s": "soon"},
                "review": {"nope": True},
                "github": {"max_issues": 0},
            },
        ),
    ],
    ids=["top level and two sections", "nested model", "not a table", "with a section read"],
)
def test_a_bad_section_read_later_fails_the_load_as_one_model_of_the_settings_did(
    workspace: Path, toml: str, data: dict[str, Any]
) -> None:
    (workspace / "worker.toml").write_text(toml)
    with pytest.raises(ConfigError) as raised:
        load_settings(workspace)
    lines = [line.strip() for line in str(raised.value).splitlines()]
    lines = lines[1:] if lines[0] == "invalid configuration:" else lines  # one: one line
    prefix = f"{workspace.resolve() / 'worker.toml'}: "
    assert all(line.startswith(prefix) for line in lines)
    named = {line[len(prefix) :].split(";")[0] for line in lines}
    assert named == _as_one_model(workspace, data)


def test_a_bad_section_in_the_environment_fails_the_load_naming_its_variable_key(
    workspace: Path,
) -> None:
    with pytest.raises(ConfigError, match=r"daemon\.interval_s: Input should be a valid number"):
        load_settings(workspace, env={"WORKER_DAEMON__INTERVAL_S": "soon"})


def test_a_section_given_is_kept_and_one_not_given_is_its_defaults(workspace: Path) -> None:
    from worker.daemon.settings import DaemonSettings
    from worker.state.retention_settings import RetentionSettings

    (workspace / "worker.toml").write_text("[retention]\nlogs_max_bytes = 2500\n")
    settings = load_settings(workspace, env={"WORKER_DAEMON__INTERVAL_S": "90"})
    assert settings.retention == RetentionSettings(logs_max_bytes=2500)
    assert settings.daemon == DaemonSettings(interval_s=90)
    for name in ("supervision", "review", "fleet", "notify"):
        assert getattr(settings, name) == section_model(name)()
        assert getattr(settings, name) is getattr(settings, name)  # made once


def test_a_copy_keeps_the_sections_and_replacing_one_leaves_the_original(
    workspace: Path,
) -> None:
    (workspace / "worker.toml").write_text("[daemon]\ninterval_s = 90\n")
    settings = load_settings(workspace)
    copy = settings.model_copy(update={"claude_bin": "other-claude"})
    assert (copy.claude_bin, copy.daemon.interval_s) == ("other-claude", 90)
    faster = settings.with_sections(daemon=settings.daemon.model_copy(update={"interval_s": 5}))
    assert (faster.daemon.interval_s, settings.daemon.interval_s) == (5, 90)
    assert faster.workspace == settings.workspace


def test_a_section_not_given_is_imported_at_its_first_read(workspace: Path) -> None:
    """Loading the settings imports none of the sections read later; reading one imports
    that one only."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from worker.config import load_settings\n"
        f"settings = load_settings(Path({str(workspace)!r}))\n"
        "names = ('worker.supervision.settings', 'worker.daemon.settings')\n"
        "before = [n for n in names if n in sys.modules]\n"
        "settings.daemon.interval_s\n"
        "print(before, [n for n in names if n in sys.modules])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert proc.stdout.split("\n")[-2] == "[] ['worker.daemon.settings']"

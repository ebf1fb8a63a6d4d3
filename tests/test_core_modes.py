"""Modes: the specification's format, validation, escalation chains, auto-detection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worker.errors import ConfigError
from worker.models import Task
from worker.modes import load_modes

REPO = Path(__file__).resolve().parents[1]


def write(tmp_path: Path, modes: list[dict]) -> Path:
    path = tmp_path / "modes.json"
    path.write_text(json.dumps({"modes": modes}))
    return path


def test_shipped_modes_are_the_specifications_four() -> None:
    modes = load_modes(REPO / "modes" / "modes.json")
    table = {m.id: (m.model, m.max_iterations) for m in modes.modes.values()}
    assert table == {
        "sync-simple": ("haiku", 3),
        "sync-complex": ("sonnet", 5),
        "code-simple": ("haiku", 5),
        "code-complex": ("opus", 10),
    }
    assert modes.chain("code-simple") == ["code-simple", "code-complex"]
    assert modes.chain("sync-simple") == ["sync-simple", "sync-complex"]


def test_embedded_defaults_match_the_shipped_file() -> None:
    shipped = (REPO / "modes" / "modes.json").read_text()
    embedded = (REPO / "worker" / "defaults" / "modes.json").read_text()
    assert json.loads(shipped) == json.loads(embedded)
    assert load_modes(None).modes.keys() == load_modes(REPO / "modes" / "modes.json").modes.keys()


def test_spec_format_with_extra_top_level_keys_loads(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(
        json.dumps(
            {
                "version": "1.0",
                "modes": [
                    {
                        "id": "a",
                        "model": "haiku",
                        "maxIterations": 2,
                        "escalation": {"triggerMode": "b", "maxIterations": 2},
                    },
                    {"id": "b", "model": "opus", "maxIterations": 4},
                ],
            }
        )
    )
    modes = load_modes(path)
    assert modes.get("a").escalation is not None
    assert modes.next_mode("a") == "b"
    assert modes.next_mode("b") is None


def test_unknown_trigger_mode_is_a_config_error(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        [{"id": "a", "model": "m", "maxIterations": 1, "escalation": {"triggerMode": "nope"}}],
    )
    with pytest.raises(ConfigError, match="triggerMode 'nope'"):
        load_modes(path)


def test_escalation_cycle_is_a_config_error(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        [
            {"id": "a", "model": "m", "maxIterations": 1, "escalation": {"triggerMode": "b"}},
            {"id": "b", "model": "m", "maxIterations": 1, "escalation": {"triggerMode": "a"}},
        ],
    )
    with pytest.raises(ConfigError, match="cycle: a -> b -> a"):
        load_modes(path)


def test_bad_values_name_the_key(tmp_path: Path) -> None:
    path = write(tmp_path, [{"id": "a", "model": "m", "maxIterations": 0}])
    with pytest.raises(ConfigError, match=r"modes\.0\.maxIterations"):
        load_modes(path)


def test_escalate_to_accepts_a_stronger_mode_or_its_model_only() -> None:
    modes = load_modes(None)
    assert modes.next_mode("code-simple", "code-complex") == "code-complex"
    assert modes.next_mode("code-simple", "opus") == "code-complex"
    # Not in the chain: fall back to the trigger mode, never jump sideways.
    assert modes.next_mode("code-simple", "sync-complex") == "code-complex"


def test_detection_is_deterministic_and_explicit_mode_wins() -> None:
    modes = load_modes(None)
    assert modes.detect(Task("t", "inbox", "Fix the parser", mode="code-complex")) == (
        "code-complex",
        "MODE_FROM_TASK",
    )
    assert modes.detect(Task("t", "inbox", "Weekly status report")) == (
        "sync-simple",
        "MODE_MATCHED_RULE",
    )
    assert modes.detect(Task("t", "inbox", "Fix the parser")) == ("code-simple", "MODE_DEFAULT")
    # An unknown explicit mode does not crash detection.
    assert modes.detect(Task("t", "inbox", "Fix it", mode="nope"))[0] == "code-simple"

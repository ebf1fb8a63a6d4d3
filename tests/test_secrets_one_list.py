"""One list of secrets (worker/secrets.py), every consumer held to it: for each word that marks a
secret variable and each token shape the module declares, the logs, the agent's masked events,
the dashboard, the notifications, the printed schedules and the agent's environment hide it.
Then the acceptance of issue 40: an agent that repeats the operator's secrets leaves none of them
in `show`, `log`, `run --json`, the inbox reply or any file of the state folder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from worker import secrets
from worker.agents.base import mask_result
from worker.cli.app import app
from worker.config import load_settings
from worker.models import AgentEvent, EventKind
from worker.operator.notify.outbox import enqueue, pending
from worker.process.platform.schedule import schedule_env
from worker.process.proc import child_env, output_redactor, redact
from worker.results import AgentResult
from worker.state.store import Store
from worker.web.views import scrubber

from .conftest import FakeAgent, state_of, write_message

# One example of each shape the module declares: a shape added without one fails here.
SHAPE_SAMPLES = {
    "github": "ghp_" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8",
    "openai/anthropic": "sk-ant-" + "api03-Zx9Cv8Bn7Mm6Ll5Kk4Jj3",
    "google": "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6",
    "aws key id": "AKIA" + "IOSFODNN7EXAMPLE",
    "pem private key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
    "-----END OPENSSH PRIVATE KEY-----",
}
NAMES = [f"MY_{word.upper()}" for word in secrets.NAME_WORDS]


def value_for(name: str) -> str:
    return f"v4lue-of-{name.lower()}-7f3e9"


def text_consumers(workspace: Path) -> dict[str, object]:
    """Every place a text is masked before worker keeps or shows it, as text -> text."""
    (workspace / "worker.toml").write_text(
        '[notify]\nevents = ["done"]\n[notify.webhook]\nurl = "http://127.0.0.1:9/hook"\n'
    )
    settings = load_settings(workspace)

    def notification(text: str) -> str:
        with Store(settings.db_path) as store:
            enqueue(settings, store, "done", f"k{len(pending(store))}", "title", text)
            (row,) = store.db.execute("SELECT text FROM notify_outbox ORDER BY id DESC LIMIT 1")
            return str(row[0])

    def agent_event(text: str) -> str:
        event = AgentEvent(kind=EventKind.TEXT, index=0, text=text)
        result = mask_result(AgentResult(0, final_text=text, events=[event]), output_redactor())
        return f"{result.final_text} {result.events[0].text}"

    return {
        "log line": lambda text: output_redactor()(text),
        "command line, error": redact,
        "agent's events and STATUS": agent_event,
        "dashboard": lambda text: scrubber()({"x": [text]})["x"][0],
        "notification": notification,
    }


@pytest.mark.parametrize("name", NAMES)
def test_every_consumer_hides_a_variable_named_like_a_secret(
    name: str, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A variable whose name holds one of the module's words: its value is hidden by every
    text consumer, kept out of a printed schedule and out of an agent's environment."""
    monkeypatch.setenv(name, value_for(name))
    for consumer, hide in text_consumers(workspace).items():
        shown = hide(f"the agent says {value_for(name)} here")  # type: ignore[operator]
        assert value_for(name) not in shown and "the agent says" in shown, consumer
    worker_name = f"WORKER_{name}"
    assert worker_name in schedule_env({worker_name: "x" * 12, "PATH": "/bin"}).left_out
    for agent in secrets.AGENT_API:
        assert name not in secrets.agent_env(agent, {name: value_for(name), "PATH": "/bin"})


@pytest.mark.parametrize("shape", sorted(SHAPE_SAMPLES))
def test_every_consumer_hides_a_token_shape_wherever_it_comes_from(
    shape: str, workspace: Path
) -> None:
    """A token shaped like one the module declares, in no variable: hidden by every text
    consumer, raw and as a JSON-escaped string (how an iteration log stores it)."""
    assert set(SHAPE_SAMPLES) == set(secrets.SHAPES)
    sample = SHAPE_SAMPLES[shape]
    for consumer, hide in text_consumers(workspace).items():
        for form in (sample, json.dumps(sample)[1:-1]):
            shown = hide(f"found {form} in a file")  # type: ignore[operator]
            assert sample.splitlines()[1 if "\n" in sample else 0] not in shown, consumer


def test_a_url_password_is_hidden_by_every_consumer(workspace: Path) -> None:
    """`scheme://user:password@host`, in no variable: every text consumer shows `user:***@`."""
    url = "postgresql://fleet:Tr1cky-pa55word@db.example:5432/worker"
    for consumer, hide in text_consumers(workspace).items():
        shown = hide(f"connect to {url}")  # type: ignore[operator]
        assert "Tr1cky-pa55word" not in shown and "fleet:***@db.example" in shown, consumer
    assert schedule_env({"WORKER_PLACE": url}).left_out == ("WORKER_PLACE",)


def test_a_variable_a_setting_names_is_a_secret_whatever_its_name(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`[notify.telegram] token_env` names a variable that looks like nothing: once the
    settings are read, its value is hidden and it reaches no child, without another list."""
    (workspace / "worker.toml").write_text('[notify.telegram]\ntoken_env = "CHAT_BRIDGE_X"\n')
    monkeypatch.setenv("CHAT_BRIDGE_X", "1234567:bridge-value-abc")
    from worker.operator.notify.channels import bot_of

    bot_of(load_settings(workspace).notify)
    assert "bridge-value" not in redact("sent 1234567:bridge-value-abc")
    assert "CHAT_BRIDGE_X" not in child_env()


# -- the acceptance: an agent repeats the operator's secrets --------------------------------
KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACDQxN1mZ8JqfL0aUq3c2Yv4X7uKpQe9Wm1oHsTn6bRgAAAAJjr8V1Q6/Fd\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
)
SECRETS = {
    "SSH_PRIVATE_KEY": KEY,
    "DATABASE_URL": "postgresql://app:Db-pa55word-x1@db.internal:5432/app",
    "PAYMENTS_API_KEY": "pay-live-0c9f8e7d6b5a4c3b",
    "SENTRY_DSN": "https://3f2a1b0c9d8e7f6a@o12345.ingest.sentry.io/678",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
}
# What must show nowhere: each value, the key's body lines, the URL's password.
NEVER = [
    *(v.strip() for v in SECRETS.values()),
    *KEY.splitlines()[1:3],
    "Db-pa55word-x1",
]


@pytest.mark.usefixtures("only_the_task")
def test_an_agent_repeating_the_operators_secrets_leaves_none_anywhere(
    workspace: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stand-in claude read the operator's secrets and repeats them in its tool output
    and its STATUS reason (the key JSON-escaped in the stream): `run --json`, `show`, `log`,
    the inbox reply and every file of the state folder show none of them."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    said = " ".join(SECRETS.values())
    fake_claude.answers(
        {
            "tools": [{"name": "Bash", "input": {"command": "env"}, "output": said}],
            "text": f"I found these: {said}",
            "status": "success",
            "reason": f"found {said}".replace("\n", " "),
        }
    )
    write_message(workspace, "leaky")
    run = subprocess.run(
        [sys.executable, "-m", "worker", "run", "--json", "-w", str(workspace)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    shown = [run.stdout, run.stderr]
    for argv in (["show", "1"], ["log"], ["log", "--json"]):
        done = CliRunner().invoke(app, [*argv, "-w", str(workspace)])
        assert done.exit_code == 0, done.output
        shown.append(done.stdout)
    assert "STATUS: success - found" in shown[2]  # `show`: the reason, what is left of it
    (reply,) = [p.read_text() for p in (workspace / "inbox").rglob("*reply*.json")]
    assert "I found these: ***" in reply
    shown.append(reply)
    state = state_of(workspace)
    files = {p: p.read_bytes() for p in state.rglob("*") if p.is_file()}
    assert any(p.name.endswith(".jsonl") for p in files)
    for secret in NEVER:
        escaped = json.dumps(secret)[1:-1]
        for text in shown:
            assert secret not in text and escaped not in text, (secret, text[:300])
        for path, data in files.items():
            assert secret.encode() not in data and escaped.encode() not in data, (secret, path)

"""Start-up stays light without changing what children see: Rich only when something is
printed through it, no xml.sax for the Task Scheduler XML, and pydantic's plugin scan off in
worker's own process only."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from xml.sax.saxutils import escape as sax_escape

import pytest

from tests.conftest import git, write_message
from worker.process.platform.schedule import escape


def _modules_after(code: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env=env,
    )
    return proc.stdout.strip().splitlines()[-1]


def test_a_json_dry_run_loads_neither_rich_nor_xml_sax(workspace: Path) -> None:
    code = (
        "import sys\n"
        "from worker.cli.app import app\n"
        f"sys.argv = ['worker', 'run', '--dry-run', '--json', '--workspace', {str(workspace)!r}]\n"
        "try:\n    app()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'rich' or m == 'xml.sax'))\n"
    )
    assert _modules_after(code) == "[]"


# Modules a dry run never uses: the adapters it does not run, the notification channels (the
# bot's commands), the fleet's database and psycopg, the process layer's psutil and ctypes
# (`worker.process.lazyimport` stands in for them), the GitHub and git libraries with no repository
# configured, Rich and the reviewers.
NEVER_IN_A_DRY_RUN = (
    "worker.agents.base",
    "worker.agents.codex",
    "worker.agents.gemini",
    "worker.agents.command",
    "worker.operator.notify.telegram",
    "worker.fleet.session",
    "worker.fleet.db",
    "worker.review.run",
    "worker.process.orphans",
    "worker.run.tasks",
    "worker.run.loop",
    "psycopg",
    "psutil",
    "ctypes",
    "worker.process.platform.winjob",
    "github",
    "git",
    "rich",
)


def _dry_run_modules(ws: Path) -> set[str]:
    """Every module (and package) loaded by `worker run --dry-run --json` in `ws`."""
    return _modules_of(ws, "run", "--dry-run", "--json")


def _modules_of(ws: Path, *argv: str) -> set[str]:
    """Every module (and package) loaded by `worker ARGV --workspace WS`."""
    code = (
        "import sys\n"
        "from worker.cli.app import app\n"
        f"sys.argv = ['worker', *{argv!r}, '--workspace', {str(ws)!r}]\n"
        "try:\n    app()\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sys.modules))\n"
    )
    names = _modules_after(code).split()
    return set(names) | {name.split(".")[0] for name in names}


# What only work needs: the process layer (worker.process.proc, its bounded reads) and git's
# helpers, for the maintenance checks, an agent, or a worktree a dead run left behind.
ONLY_WITH_WORK = (
    "worker.process.proc",
    "worker.process.boundedio",
    "worker.process.gitsafe",
    "worker.process.workspace_git",
)


@pytest.mark.parametrize(
    "argv",
    [("run", "--json"), ("run", "--dry-run", "--json"), ("status", "--json")],
    ids=["idle run", "dry run", "status"],
)
def test_nothing_to_do_needs_neither_the_process_layer_nor_git(
    workspace: Path, argv: tuple[str, ...]
) -> None:
    """An idle run (the maintenance task not due), a dry run and `status` in a repository
    with nothing to do import no process layer, no git helper, no Rich and no xml.sax."""
    git(workspace, "init", "-q")
    (workspace / "worker.toml").write_text("[fallback]\nenabled = false\n")
    loaded = _modules_of(workspace, *argv)
    assert "worker.kernel.snapshot" in loaded  # it did look at the sources
    assert sorted(loaded.intersection((*ONLY_WITH_WORK, "rich", "xml.sax"))) == []


# What a path with nothing to do (and no worker.toml) does not import, each kept where the code
# that needs it runs: the TOML parser (only with a worker.toml to read), the notification
# channels (only with something to send), the daily cap's wait (only when a task reaches it),
# the agents' preflight (only with a task to take), the reply rules (only with a reply to
# read), GitHub's wait checks and look (only with a wait), getpass and its termios (only to
# name who wrote a note), the agent's request and results and a task's result (only with a
# task), the order file `worker cancel` writes (only with one to read); for a dry run, which
# records and notifies nothing, the retention of records, the notifier and the spend; for a
# dry run and `status` with no database yet, SQLite itself and what `status` would read there
# (the spend, the unsent notifications, the running task's heartbeat, the last runs).
NOTHING_TO_DO = (
    "worker.kernel.replies",
    "worker.waits.github_checks",
    "worker.waits.github_look",
    "worker.sources.github.selection",
    "getpass",
    "termios",
    "worker.results",
    "worker.kernel.order_file",
)
# The sections of the settings that a dry run and `status` never read, made at their first
# use (worker/config.py), and phase 0's look at the waits' conditions, with none to look at.
SECTIONS_READ_LATER = (
    "worker.supervision.settings",
    "worker.review.settings",
    "worker.daemon.settings",
    "worker.fleet.settings",
    "worker.operator.notify.settings",
    "worker.state.retention_settings",
)
NO_WAIT_TO_LOOK_AT = (
    "worker.waits.checking",
    "worker.waits.builtin",
    "worker.waits.conditions",
    "worker.waits.lookups",
    "worker.waits.expiry",
)
KEPT_OFF = {
    "idle run": (
        "tomllib",
        "worker.operator.notify.channels",
        "worker.waits.saving",
        "worker.agents.infra",
        *NOTHING_TO_DO,
        *NO_WAIT_TO_LOOK_AT,
    ),
    "dry run": (
        "tomllib",
        "worker.operator.notify.channels",
        "worker.waits.saving",
        "worker.agents.infra",
        "worker.agents.registry",
        "worker.state.retention",
        "worker.operator.notify.events",
        "worker.operator.notify.outbox",
        "worker.run.costs",
        "sqlite3",
        *NOTHING_TO_DO,
        *SECTIONS_READ_LATER,
        *NO_WAIT_TO_LOOK_AT,
    ),
    "status": (
        "tomllib",
        "worker.operator.notify.channels",
        "worker.waits.saving",
        *NOTHING_TO_DO,
        "worker.run.costs",
        "worker.operator.notify.outbox",
        "worker.state.progress",
        "worker.state.run_log",
        "sqlite3",
        *SECTIONS_READ_LATER,
        *NO_WAIT_TO_LOOK_AT,
    ),
}


@pytest.mark.parametrize(
    ("argv", "kept_off"),
    [
        (("run", "--json"), KEPT_OFF["idle run"]),
        (("run", "--dry-run", "--json"), KEPT_OFF["dry run"]),
        (("status", "--json"), KEPT_OFF["status"]),
    ],
    ids=list(KEPT_OFF),
)
def test_nothing_to_do_imports_no_toml_parser_channel_or_preflight(
    workspace: Path, argv: tuple[str, ...], kept_off: tuple[str, ...]
) -> None:
    """With no worker.toml and nothing to do, an idle run, a dry run and `status` import
    none of KEPT_OFF's modules for their path."""
    loaded = _modules_of(workspace, *argv)
    assert "worker.kernel.snapshot" in loaded  # it did look at the sources
    assert sorted(loaded.intersection(kept_off)) == []


def test_nothing_to_do_compiles_no_pattern_it_never_matches(workspace: Path) -> None:
    """The reply rules, GitHub's issue patterns, the fleet URL's password patterns, an order's
    subject and a repository's name are compiled at their first use, which an idle run, a dry
    run and `status` with nothing to do never reach; nor do they load Python's tokenizer
    (pydantic reads the signature of a default factory, and `list`'s is parsed by it)."""
    code = (
        "import re, sys\n"
        "compiled = set()\n"
        "inner = re._compile  # what re.compile and re.match alike go through\n"
        "def spy(pattern, flags):\n"
        "    compiled.add(pattern)\n"
        "    return inner(pattern, flags)\n"
        "re._compile = spy\n"
        "from worker.cli.app import app\n"
        "for argv in (['run', '--json'], ['run', '--dry-run', '--json'], ['status', '--json']):\n"
        f"    sys.argv = ['worker', *argv, '--workspace', {str(workspace)!r}]\n"
        "    try:\n        app()\n    except SystemExit:\n        pass\n"
        "import tokenize\n"
        "from worker import secrets as fleet  # the fleet URL's patterns live there\n"
        "from worker.kernel import control, replies\n"
        "from worker.sources.github import selection as github\n"
        "from worker.sources.github import settings as github_settings\n"
        "patterns = {\n"
        "    'replies': [rule[1] for rule in replies._RULES],\n"
        "    'github': [github._AGENT, github._TASK_ID, github._P_LABEL, github._PRIORITY_LABEL],\n"
        "    'fleet': [fleet._URL_PASSWORD, fleet._DSN_PASSWORD],\n"
        "    'orders': [control._SUBJECT],\n"
        "    'repos': [github_settings._REPO],\n"
        "    'tokenizer': [tokenize.PseudoToken],\n"
        "}\n"
        "print(len(compiled) > 0, sorted(name for name, some in patterns.items()\n"
        "    if any(getattr(p, 'pattern', p) in compiled for p in some)))\n"
    )
    assert _modules_after(code) == "True []"


def test_a_dry_run_and_status_build_no_model_they_never_validate(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The inbox message, wait state, note, order file and the model classifier's answer are
    pydantic models built at their first use (`defer_build`), which a dry run and `status`
    with nothing to do never reach. The settings are validated by `Settings`' one validator,
    the sections they read included: no section builds a validator of its own, and those made
    at their first use (none here) build none either."""
    for name in ("WORKER_SANDBOX__MODE", "WORKER_SANDBOX__UNTRUSTED_MODE"):
        monkeypatch.delenv(name)  # the suite's: a section given is validated
    code = (
        "import sys\n"
        "from worker.cli.app import app\n"
        "for argv in (['run', '--dry-run', '--json'], ['status', '--json']):\n"
        f"    sys.argv = ['worker', *argv, '--workspace', {str(workspace)!r}]\n"
        "    try:\n        app()\n    except SystemExit:\n        pass\n"
        "from pydantic import BaseModel\n"
        "from worker.config import LAZY_SECTIONS, Settings, section_model\n"
        "from worker.kernel.order_file import OrderFile\n"
        "from worker.kernel.replies import _ModelAnswer\n"
        "from worker.sources.message import Message\n"
        "from worker.waits.intercom import Note\n"
        "from worker.waits.state import WaitContext, WaitState\n"
        "models = [Settings, OrderFile, _ModelAnswer, Message, Note, WaitContext, WaitState]\n"
        "from worker.operator.notify.settings import TelegramSettings, WebhookSettings\n"
        "from worker.review.settings import ReviewerSettings, UrgencyWeights\n"
        "from worker.supervision.settings import PaceSettings, Threshold, ToolSettings\n"
        "parts = [f.annotation for f in Settings.model_fields.values()\n"
        "         if isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel)]\n"
        "parts += [section_model(name) for name in LAZY_SECTIONS]\n"
        "parts += [TelegramSettings, WebhookSettings, ReviewerSettings, UrgencyWeights,\n"
        "          PaceSettings, Threshold, ToolSettings]\n"
        "print(len(parts), [m.__name__ for m in models + parts if m.__pydantic_complete__])\n"
    )
    assert _modules_after(code) == "17 ['Settings']"


def test_the_sections_validated_as_parts_of_the_settings_are_as_made_by_themselves(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Validating the sections as parts of `Settings`, defaults included, gives what each
    section gives when made by itself, as do those made at their first use; a worker.toml
    naming one streak threshold keeps the defaults of the others, and an unknown one is still
    refused."""
    from pydantic import BaseModel

    from worker.config import LAZY_SECTIONS, Settings, load_settings, section_model
    from worker.errors import ConfigError
    from worker.supervision.settings import SupervisionSettings, Threshold

    for name in ("WORKER_SANDBOX__MODE", "WORKER_SANDBOX__UNTRUSTED_MODE"):
        monkeypatch.delenv(name)  # the suite's own settings: here the defaults
    settings = load_settings(workspace)
    sections = {
        name: field.annotation
        for name, field in Settings.model_fields.items()
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
    } | {name: section_model(name) for name in LAZY_SECTIONS}
    assert len(sections) == 10
    assert {name: getattr(settings, name) for name in sections} == {
        name: section() for name, section in sections.items()
    }
    (workspace / "worker.toml").write_text("[supervision.thresholds.loop]\nwarn = 4\n")
    thresholds = load_settings(workspace).supervision.thresholds
    assert thresholds == {**SupervisionSettings().thresholds, "loop": Threshold(warn=4)}
    (workspace / "worker.toml").write_text("[supervision.thresholds.lop]\nwarn = 4\n")
    with pytest.raises(ConfigError, match="lop"):
        load_settings(workspace)


def test_a_dry_run_in_a_fresh_repository_imports_only_what_it_uses(workspace: Path) -> None:
    """Nothing to do: no adapter at all, no notification channel, no fleet, no psutil."""
    git(workspace, "init", "-q")
    loaded = _dry_run_modules(workspace)
    assert "worker.run.runner" in loaded and "worker.waits.phase0" in loaded  # it did run
    assert sorted(loaded.intersection(NEVER_IN_A_DRY_RUN)) == []
    assert "worker.agents.claude" not in loaded


def test_a_dry_run_with_a_task_loads_the_configured_adapter_only(workspace: Path) -> None:
    """With a task to take, the dry run shows the agent's command line: the mode's adapter
    (Claude Code by default) is imported, and no other."""
    git(workspace, "init", "-q")
    write_message(workspace, "msg-1")
    loaded = _dry_run_modules(workspace)
    assert "worker.agents.claude" in loaded
    assert sorted(loaded.intersection(NEVER_IN_A_DRY_RUN) - {"worker.agents.base"}) == []


def test_a_lazy_module_is_imported_at_its_first_use_and_reads_through() -> None:
    """`worker.process.lazyimport.lazy` imports nothing until an attribute is read, then answers
    from the real module (a change made to it later is seen too); a missing module fails at use."""
    code = (
        "import sys\n"
        "from worker.process.lazyimport import lazy\n"
        "m = lazy('colorsys')\n"
        "before = 'colorsys' in sys.modules\n"
        "value = m.rgb_to_hsv(1.0, 0.0, 0.0)\n"
        "sys.modules['colorsys'].ONE_THIRD = 'changed'\n"
        "try:\n    lazy('no_such_module_here').x\nexcept ModuleNotFoundError as e:\n"
        "    missing = e.name\n"
        "print(before, value, 'colorsys' in sys.modules, m.ONE_THIRD, missing)\n"
    )
    assert _modules_after(code) == "False (0.0, 1.0, 1.0) True changed no_such_module_here"


@pytest.mark.parametrize("text", ["a & b", "<Command>", "x > y < z", "&amp;", "plain"])
def test_the_task_scheduler_escape_is_xml_sax_s(text: str) -> None:
    assert escape(text) == sax_escape(text)


def test_children_get_the_environment_worker_started_with() -> None:
    """worker's command line switches pydantic's plugin scan off for itself; its children
    (agents, the projects they test) do not inherit the switch, unless the operator set it."""
    code = (
        "import os, worker.cli\n"
        "from worker.process.proc import child_env\n"
        "child = child_env()\n"
        "print(os.environ.get('PYDANTIC_DISABLE_PLUGINS'), "
        "child.get('PYDANTIC_DISABLE_PLUGINS'), "
        "[k for k in child if k.startswith('PYDANTIC')])\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYDANTIC")}
    assert _modules_after(code, env) == "__all__ None []"
    env["PYDANTIC_DISABLE_PLUGINS"] = "logfire"
    assert _modules_after(code, env) == "logfire logfire ['PYDANTIC_DISABLE_PLUGINS']"
    # A `worker serve` started by `worker supervise` inherits the switch with worker's mark.
    env.update(
        dict.fromkeys(
            ("PYDANTIC_DISABLE_PLUGINS", "PYDANTIC_DISABLE_PLUGINS_SET_BY_WORKER"), "__all__"
        )
    )
    assert _modules_after(code, env) == "__all__ None []"


def _gc_after(ws: Path, entry: str) -> str:
    """Run `worker run --dry-run --json` in `ws` through `entry` (`main`, the program, or `app`,
    as a program importing worker calls it); print the collections seen with nothing frozen yet
    once worker started, whether start-up was frozen, and whether the thresholds are back."""
    code = (
        "import atexit, gc, sys\n"
        f"from worker.cli.app import {entry} as entry\n"
        "usual = gc.get_threshold()\n"
        "early = []\n"
        "gc.callbacks.append(lambda phase, info: early.append(1)\n"
        "                    if phase == 'start' and not gc.get_freeze_count() else None)\n"
        "atexit.register(lambda: print(len(early), gc.get_freeze_count() > 0,\n"
        "                              gc.get_threshold() == usual, gc.isenabled()))\n"
        f"sys.argv = ['worker', 'run', '--dry-run', '--json', '--workspace', {str(ws)!r}]\n"
        "entry()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


def test_the_program_collects_no_garbage_while_it_starts_and_freezes_what_it_built(
    workspace: Path,
) -> None:
    """worker's program runs no cycle collection from its start to its settings loaded (the
    classes and schemas it builds live as long as it), freezes them, then collects as usual;
    a program calling worker's `app` keeps its own collector as it was."""
    assert _gc_after(workspace, "main") == "0 True True True"
    early, frozen, usual, enabled = _gc_after(workspace, "app").split()
    assert int(early) > 0 and (frozen, usual, enabled) == ("False", "True", "True")

"""Git as data: no key or file the agent can write makes worker's git start a program or move
a ref it did not mean to.

Each attack is written by a stand-in for the agent (this test, or the fake `claude` of
tests/conftest.py for the whole run) where the agent can write it: the repository's
`.git/config` (an in-tree task may), a file the config includes, the worktree's own git
folder (`config.worktree`, `HEAD`, `commondir`), its `.git` file and `.gitattributes`. Then
worker's real operations run on real repositories: progress (`git status`), the partial diff,
the reviewers' changes, worktree creation, the commit at the end of a task, the push and the
merge of a pull request's base. The attack's program writes a marker outside the tree: it must
never appear, and the work must still arrive where worker meant it to.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from tests.conftest import FakeAgent, git, needs_posix, write_message
from tests.sandbox_support import sandbox_runtime
from tests.test_sandbox import STATUS, bwrap_works, command_mode
from worker.config import load_settings
from worker.errors import UsageError
from worker.process.workspace_git import (
    changed_files,
    create_worktree,
    ensure_repo,
    finish_worktree,
    save_diff,
    work_state,
)
from worker.review.changes import task_changes
from worker.run.runner import RunOptions, run_once
from worker.sandbox.box import policy_for
from worker.sources.github.delivery import bring_base_in, push_branch
from worker.sources.github.settings import GitHubSettings

pytestmark = needs_posix("shell scripts as the agent's programs")

# Each attack: config keys (`{prog}` is the agent's program), and a `.gitattributes` line.
ATTACKS: dict[str, tuple[dict[str, str], str]] = {
    "filter-clean": ({"filter.evil.clean": "{prog}", "filter.evil.required": "true"}, "filter"),
    "filter-smudge": ({"filter.evil.smudge": "{prog}"}, "filter"),
    "filter-process": ({"filter.evil.process": "{prog}"}, "filter"),
    "diff-textconv": ({"diff.evil.textconv": "{prog}"}, "diff"),
    "diff-command": ({"diff.evil.command": "{prog}"}, "diff"),
    "diff-external": ({"diff.external": "{prog}"}, ""),
    "merge-driver": ({"merge.evil.driver": "{prog} %O %A %B"}, "merge"),
    "gpg-program": ({"gpg.program": "{prog}", "commit.gpgSign": "true", "tag.gpgSign": "true"}, ""),
    "gpg-ssh-program": (
        {
            "gpg.format": "ssh",
            "gpg.ssh.program": "{prog}",
            "gpg.ssh.defaultKeyCommand": "{prog}",
            "commit.gpgSign": "true",
        },
        "",
    ),
    "gpg-x509-program": (
        {"gpg.format": "x509", "gpg.x509.program": "{prog}", "commit.gpgSign": "true"},
        "",
    ),
    "remote-packs": (
        {
            "remote.origin.url": "{origin}",
            "remote.origin.receivepack": "{prog}",
            "remote.origin.uploadpack": "{prog}",
        },
        "",
    ),
    "ssh-command": (
        {"core.sshCommand": "{prog}", "remote.origin.url": "ssh://git.invalid/a.git"},
        "",
    ),
    "url-insteadof-ext": (
        {"protocol.allow": "always", "url.ext::{prog} #.insteadOf": "{origin}"},
        "",
    ),
    "pager-askpass-editor": (
        {
            "core.pager": "{prog}",
            "core.askPass": "{prog}",
            "core.editor": "{prog}",
            "sequence.editor": "{prog}",
            "pager.status": "{prog}",
        },
        "",
    ),
    "credential-helper": ({"credential.helper": "!{prog}"}, ""),
    "fsmonitor-hooks-alternate-refs": (
        {
            "core.fsmonitor": "{prog}",
            "core.hooksPath": "{hooks}",
            "core.alternateRefsCommand": "{prog}",
        },
        "",
    ),
    "include-path": ({"include.path": "{included}"}, "filter"),
    "include-if": ({"includeIf.gitdir:/.path": "{included}"}, "filter"),
    "core-worktree": ({"core.worktree": "{elsewhere}"}, ""),
    "worktree-config": ({"extensions.worktreeConfig": "true"}, "filter"),
}


class Attack:
    """A workspace with its origin, a program that leaves a marker, and the planting."""

    def __init__(self, tmp_path: Path, name: str) -> None:
        self.root, self.name = tmp_path, name
        self.ws, self.origin = tmp_path / "ws", tmp_path / "origin.git"
        self.marker = tmp_path / "MARKER"
        self.prog = tmp_path / "evil.sh"
        marker = shlex.quote(str(self.marker))
        # A filter gets the file on stdin and no argument: it gives it back; the others stop.
        self.prog.write_text(
            f'#!/bin/sh\necho "$0 $*" >> {marker}\n[ $# = 0 ] && exec cat\nexit 1\n'
        )
        self.prog.chmod(0o755)
        hooks = tmp_path / "hooks"
        hooks.mkdir()
        for hook in ("pre-commit", "post-checkout", "reference-transaction", "pre-push"):
            (hooks / hook).write_text(f"#!/bin/sh\nexec {self.prog}\n")
            (hooks / hook).chmod(0o755)
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / "elsewhere" / "stray.txt").write_text("not the task's\n")
        self.values = {
            "prog": str(self.prog),
            "origin": str(self.origin),
            "hooks": str(hooks),
            "included": str(self.ws / "included.cfg"),
            "elsewhere": str(tmp_path / "elsewhere"),
        }
        self.keys = {
            k.format(**self.values): v.format(**self.values) for k, v in ATTACKS[name][0].items()
        }
        self.attribute = ATTACKS[name][1]

    def repository(self) -> None:
        git(self.root, "init", "-q", "--bare", "-b", "main", str(self.origin))
        self.ws.mkdir()
        git(self.ws, "init", "-q", "-b", "main")
        (self.ws / "README.md").write_text("hello\n")
        (self.ws / "data.txt").write_text("one\n")
        if self.attribute:
            (self.ws / ".gitattributes").write_text(f"* {self.attribute}=evil\n")
        git(self.ws, "add", "-A")
        git(self.ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
        git(self.ws, "push", "-q", str(self.origin), "main")

    def plant(self, config: Path) -> None:
        """What the agent writes: the keys into `config`, a filter into the included file."""
        (self.ws / "included.cfg").write_text(f'[filter "evil"]\n\tclean = {self.prog}\n')
        for key, value in self.keys.items():
            git(self.root, "config", "--file", str(config), "--add", key, value)


def _worker_operations(attack: Attack) -> None:
    """Everything worker's git does on an agent's repository, in a task's order."""
    ws, state = attack.ws, attack.root / "state"
    settings = GitHubSettings(remote=str(attack.origin))
    attack.plant(ws / ".git" / "config")  # an earlier in-tree task wrote the main config
    tree, branch = create_worktree(ws, state / "worktrees", "task-1")  # checks out: smudge
    attack.plant(ws / ".git" / "worktrees" / tree.name / "config.worktree")
    (tree / "data.txt").write_text("one\nagent work\n")
    (tree / "README.md").write_text("hello from the branch\n")
    assert "data.txt" in changed_files(tree) and work_state(tree) is not None
    assert save_diff(tree, attack.root / "partial.diff") is not None
    (ws / "data.txt").write_text("in-tree work\n")  # in-tree progress and diff too
    assert work_state(ws) is not None and save_diff(ws, attack.root / "main.diff")
    assert finish_worktree(ws, tree, "worker: task-1 (done)")
    assert task_changes(ws, branch, 10_000).files
    assert push_branch(settings, ws, branch, None) is None
    # The pull request's base moved on and conflicts: worker merges it into the branch.
    other = attack.root / "other"
    git(attack.root, "clone", "-q", str(attack.origin), str(other))
    (other / "README.md").write_text("hello from main\n")
    git(other, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "moved")
    git(other, "push", "-q", "origin", "main")
    tree, branch = create_worktree(ws, state / "worktrees", "task-1")
    said = bring_base_in(settings, tree, "main", None, workspace=ws, branch=branch)
    assert "README.md" in said, said  # a conflict, in the files
    (tree / "README.md").write_text("resolved\n")
    assert finish_worktree(ws, tree, "worker: task-1 (resolved)")


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_no_key_the_agent_writes_runs_a_program_in_worker_git(tmp_path: Path, name: str) -> None:
    attack = Attack(tmp_path, name)
    attack.repository()
    _worker_operations(attack)
    assert not attack.marker.exists(), attack.marker.read_text()
    ws = attack.ws
    assert git(attack.origin, "show", "worker/task-1:data.txt") == "one\nagent work\n"
    assert git(ws, "show", "worker/task-1:README.md") == "resolved\n"
    parents = git(ws, "log", "-1", "--format=%P", "worker/task-1").split()
    assert len(parents) == 2, "worker's commit concluded the merge it began"
    assert git(ws, "rev-parse", "main") == git(attack.origin, "rev-parse", "main~1")
    assert "stray.txt" not in git(ws, "ls-tree", "-r", "--name-only", "worker/task-1")


@pytest.mark.parametrize("name", ["filter-clean", "diff-textconv", "include-path", "ssh-command"])
def test_the_attacks_are_real_plain_git_runs_them(tmp_path: Path, name: str) -> None:
    """The same planting makes plain git (as worker ran it before) start the program."""
    attack = Attack(tmp_path, name)
    attack.repository()
    attack.plant(attack.ws / ".git" / "config")
    (attack.ws / "data.txt").write_text("changed\n")
    ws = attack.ws
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    if name == "ssh-command":
        (ws / "x").write_text("x")
        subprocess_git(ws, env, "push", "origin", "main")
    else:
        subprocess_git(ws, env, "diff", "HEAD")
        subprocess_git(ws, env, "add", "-A")
    assert attack.marker.exists()


def subprocess_git(cwd: Path, env: dict[str, str], *args: str) -> None:
    import subprocess

    subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, check=False)


def _committed(ws: Path, ignored: str) -> str:
    """`ws` as a repository with one commit on main (worker's folders ignored); main's commit."""
    git(ws, "init", "-q", "-b", "main")
    (ws / "README.md").write_text("hello\n")
    (ws / ".gitignore").write_text(ignored)
    git(ws, "add", "-A")
    git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    return git(ws, "rev-parse", "main")


def _evil_repository(attack: Attack) -> Path:
    """A repository of the agent's own, with the program in its config and the task's branch."""
    evil = attack.root / "evil"
    git(attack.root, "init", "-q", "-b", "worker/task-1", str(evil))
    (evil / ".gitattributes").write_text("* filter=evil diff=evil\n")
    git(evil, "add", "-A")
    git(evil, "-c", "user.name=a", "-c", "user.email=a@a", "commit", "-qm", "agent's")
    git(evil, "config", "filter.evil.clean", str(attack.prog))
    git(evil, "config", "diff.evil.textconv", str(attack.prog))
    git(evil, "config", "core.hooksPath", str(attack.root / "hooks"))
    return evil


@pytest.mark.parametrize("how", ["dot-git-file", "commondir", "head-to-main", "head-detached"])
def test_the_worktree_git_files_the_agent_writes_decide_nothing(tmp_path: Path, how: str) -> None:
    """The worktree's `.git` file, its git folder's `commondir` and `HEAD` are the agent's to
    write: pointed at a repository of its own (with its program in the config) or at `main`,
    worker's commit still lands on the task's branch of the workspace, and only there."""
    attack = Attack(tmp_path, "filter-clean")
    attack.repository()
    ws = attack.ws
    main_before = git(ws, "rev-parse", "main")
    tree, branch = create_worktree(ws, tmp_path / "state" / "worktrees", "task-1")
    admin = ws / ".git" / "worktrees" / tree.name
    evil = _evil_repository(attack)
    evil_before = git(evil, "rev-parse", "HEAD")
    if how == "dot-git-file":
        (tree / ".git").write_text(f"gitdir: {evil / '.git'}\n")
    elif how == "commondir":
        (admin / "commondir").write_text(f"{evil / '.git'}\n")
    elif how == "head-to-main":
        (admin / "HEAD").write_text("ref: refs/heads/main\n")
    else:
        (admin / "HEAD").write_text(f"{main_before}")
    (tree / ".gitattributes").write_text("* filter=evil diff=evil\n")
    (tree / "data.txt").write_text("agent work\n")
    assert "data.txt" in changed_files(tree)
    assert finish_worktree(ws, tree, "worker: task-1 (done)")
    assert not attack.marker.exists()
    assert git(ws, "rev-parse", "main") == main_before, "main never moves"
    assert git(evil, "rev-parse", "HEAD") == evil_before, "the agent's repository is not used"
    assert git(ws, "show", f"{branch}:data.txt") == "agent work\n"
    assert git(ws, "rev-parse", f"{branch}~1") == main_before
    assert not tree.exists() and not admin.exists()


def test_a_workspace_git_folder_replaced_by_a_link_is_not_followed(tmp_path: Path) -> None:
    """`.git` made a link to another repository (with the agent's program in its config):
    worker runs no git there at all, and says why (a warning)."""
    attack = Attack(tmp_path, "filter-clean")
    attack.repository()
    evil = _evil_repository(attack)
    (attack.ws / ".git").rename(tmp_path / "moved.git")
    (attack.ws / ".git").symlink_to(evil / ".git")
    (attack.ws / "data.txt").write_text("changed\n")
    assert work_state(attack.ws) is None and save_diff(attack.ws, tmp_path / "d") is None
    assert task_changes(attack.ws, None, 1000).files == []
    assert not attack.marker.exists()


def test_a_whole_run_with_the_agent_planting_git_programs(
    tmp_path: Path, workspace: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`worker run --use-worktree` end to end: the stand-in agent (the fake `claude`, as a
    shell would) writes a filter, a textconv and hooks into the workspace's `.git/config`, a
    `.gitattributes`, turns its worktree's `.git` file to a repository of its own and its
    `HEAD` to `main`. No program of its runs; its work is on the task's branch; main is where
    it was."""
    monkeypatch.setenv("WORKER_REVIEW__ENABLED", "false")
    ws = workspace
    main_before = _committed(ws, "inbox/\nwait_states/\n")
    (tmp_path / "attack").mkdir()
    attack = Attack(tmp_path / "attack", "filter-clean")
    evil = _evil_repository(attack)
    config = shlex.quote(str(ws / ".git" / "config"))
    prog = shlex.quote(str(attack.prog))
    script = "\n".join(
        [
            f"git config --file {config} filter.evil.clean {prog}",
            f"git config --file {config} diff.evil.textconv {prog}",
            f"git config --file {config} core.hooksPath {shlex.quote(str(attack.root / 'hooks'))}",
            "echo '* filter=evil diff=evil' > .gitattributes",
            "echo agent-work > WORK.md",
            'admin=$(sed -n "s/^gitdir: //p" .git)',
            'echo "ref: refs/heads/main" > "$admin/HEAD"',
            f"echo 'gitdir: {evil / '.git'}' > .git",
        ]
    )
    wrapper = fake_claude.path.read_text()
    fake_claude.path.write_text(wrapper.replace("exec ", f"{script}\nexec "))
    fake_claude.answers({"status": "success", "reason": "done"})
    write_message(ws, "msg-git", subject="Do it")
    report = run_once(load_settings(ws), RunOptions(use_worktree=True))
    assert report.outcome.value == "success" and report.branch == "worker/msg-git"
    assert not attack.marker.exists(), attack.marker.read_text()
    assert git(ws, "rev-parse", "main") == main_before
    assert git(ws, "show", "worker/msg-git:WORK.md") == "agent-work\n"


def test_the_box_of_the_next_iteration_is_not_widened_by_the_git_file(tmp_path: Path) -> None:
    """The agent points its worktree's `.git` file (and `commondir`) at the main repository's
    git folder: the box of its next iteration still lets it write only the worktree's own git
    folder and the object store, from worker's record, never the main `.git` (config, refs)."""
    attack = Attack(tmp_path, "filter-clean")
    attack.repository()
    ws = attack.ws
    tree, _ = create_worktree(ws, tmp_path / "state" / "worktrees", "task-1")
    common = (ws / ".git").resolve()
    admin = common / "worktrees" / tree.name
    (tree / ".git").write_text(f"gitdir: {common}\n")
    (admin / "commondir").write_text(f"{tmp_path}\n")
    write = policy_for(load_settings(ws), "claude", tree).write
    assert common not in write and tmp_path.resolve() not in write
    assert admin in write and common / "objects" in write and tree.resolve() in write


@pytest.mark.parametrize("runtime", ["bwrap", "srt"])
def test_a_boxed_agent_planting_git_programs_runs_none_of_them(
    tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch, runtime: str
) -> None:
    """The same attack from inside the box (bubblewrap alone, and `srt`), by an agent that runs
    shell commands: what the box lets it write (`.gitattributes`, its `.git` file, its git
    folder's `HEAD` and `config.worktree`) and what it does not (the main `.git/config`,
    tried anyway) start no program of its in worker's git after the task."""
    if runtime == "srt":
        monkeypatch.setenv("WORKER_SANDBOX__SRT_BIN", str(sandbox_runtime()))
    else:
        bwrap_works()
        monkeypatch.setenv("WORKER_SANDBOX__SRT_BIN", str(tmp_path / "no-srt"))
    monkeypatch.setenv("WORKER_SANDBOX__MODE", "required" if runtime == "srt" else "auto")
    # The operator's own ~/.gitconfig applies to worker's git: the box must keep it read-only.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    for name in ("WORKER_REVIEW__ENABLED", "WORKER_FALLBACK__ENABLED"):
        monkeypatch.setenv(name, "false")
    ws = workspace
    main_before = _committed(ws, "inbox/\nwait_states/\nmodes/\n")
    (tmp_path / "attack").mkdir()
    attack = Attack(tmp_path / "attack", "filter-clean")
    prog = shlex.quote(str(attack.prog))
    planted = (
        f'[filter "evil"]\n\tclean = {attack.prog}\n[diff "evil"]\n\ttextconv = {attack.prog}\n'
    )
    script = "; ".join(
        [
            f"printf {shlex.quote(planted)} >> {shlex.quote(str(ws / '.git' / 'config'))}",
            "echo '* filter=evil diff=evil' > .gitattributes",
            "echo agent-work > WORK.md",
            'admin=$(sed -n "s/^gitdir: //p" .git)',
            f'printf {shlex.quote(planted)} > "$admin/config.worktree"',
            'echo "ref: refs/heads/main" > "$admin/HEAD"',
            f"git config --global filter.evil.clean {prog}",
            STATUS,
        ]
    )
    command_mode(ws, f"{script} 2>/dev/null; {STATUS}")
    write_message(ws, "msg-boxed", subject="Do it")
    report = run_once(load_settings(ws), RunOptions(use_worktree=True))
    assert report.outcome.value == "success", report.reason
    assert report.branch == "worker/msg-boxed"
    assert not attack.marker.exists(), attack.marker.read_text()
    assert git(ws, "rev-parse", "main") == main_before
    assert git(ws, "show", "worker/msg-boxed:WORK.md") == "agent-work\n"
    assert "evil" not in (ws / ".git" / "config").read_text(), "the box kept the main config"
    assert not (tmp_path / "home" / ".gitconfig").exists(), "and the operator's"


def test_refs_made_a_link_stop_worker_git_without_a_crash(tmp_path: Path) -> None:
    """`.git/refs` turned into a link to another repository's refs: worker's view is not made
    over it; progress reads as "outside git" and the run goes on."""
    attack = Attack(tmp_path, "filter-clean")
    attack.repository()
    evil = _evil_repository(attack)
    refs = attack.ws / ".git" / "refs"
    refs.rename(tmp_path / "moved-refs")
    refs.symlink_to(evil / ".git" / "refs", target_is_directory=True)
    (attack.ws / "data.txt").write_text("changed\n")
    assert work_state(attack.ws) is None and changed_files(attack.ws) == []
    assert not attack.marker.exists()


def test_a_workspace_that_is_a_linked_worktree_is_refused_in_words(tmp_path: Path) -> None:
    """A `.git` file in the workspace names another git folder, which worker never follows:
    `--use-worktree` says so and what to do, before anything is claimed."""
    attack = Attack(tmp_path, "filter-clean")
    attack.repository()
    linked = tmp_path / "linked"
    git(attack.ws, "worktree", "add", "-q", str(linked), "-b", "side")
    with pytest.raises(UsageError, match="linked worktree or a submodule"):
        ensure_repo(linked)
    assert work_state(linked) is None


def test_a_tracked_file_made_a_fifo_or_a_link_is_not_opened_by_progress(tmp_path: Path) -> None:
    """The progress digest reads changed files' bytes: a tracked file turned into a FIFO (an
    open would wait forever) or a link to a file outside is not read through."""
    attack = Attack(tmp_path, "filter-clean")
    attack.repository()
    ws = attack.ws
    (ws / "data.txt").unlink()
    os.mkfifo(ws / "data.txt")
    secret = tmp_path / "secret.txt"
    secret.write_text("one\n")
    (ws / "README.md").unlink()
    (ws / "README.md").symlink_to(secret)
    first = work_state(ws)
    assert first is not None and {"data.txt", "README.md"} <= set(first.files)
    secret.write_text("changed outside\n")
    second = work_state(ws)
    assert second is not None and second.digest == first.digest, "the target was not read"

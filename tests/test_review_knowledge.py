"""The knowledge store: the doc format, user-written docs, the token budget, relevance, the
status lifecycle, folder ownership and the index."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.reviewer_kit import finished, open_store, review_settings, write_user_doc
from worker.models import Outcome, Task
from worker.review import docs
from worker.review.hooks import after_task, prompt_sections
from worker.review.knowledge import KnowledgeStore
from worker.review.prompt import estimate_tokens, knowledge_section
from worker.review.schema import DocumentOut

USER_CONVENTION = """\
# Logging

## Rules

1. Log with `logging.getLogger(__name__)`, never print().
"""


def test_user_written_convention_is_in_the_first_tasks_prompt(tmp_path: Path) -> None:
    """A doc a user wrote before any task counts from task 1: no reviewer run, no status line."""
    settings = review_settings(tmp_path / "ws")
    write_user_doc(settings, "conventions/logging.md", USER_CONVENTION)
    with open_store(settings) as store:
        sections = prompt_sections(settings, store, Task("t1", "inbox", "add a feature"))
    assert sections[0].startswith("## PROJECT KNOWLEDGE")
    assert "### Logging (conventions, established)" in sections[0]
    assert "never print()" in sections[0]


def test_knowledge_section_stays_within_the_token_budget(tmp_path: Path) -> None:
    """Conventions come first; what does not fit is left out and counted, never cut mid-doc."""
    settings = review_settings(tmp_path / "ws", {"token_budget": 300})
    for n in range(12):
        rules = "\n".join(f"{i}. Rule {i} of doc {n}: " + "x" * 60 for i in range(1, 4))
        write_user_doc(
            settings, f"conventions/c{n:02d}.md", f"# Conv {n:02d}\n\n## Rules\n\n{rules}\n"
        )
    ks = KnowledgeStore.for_settings(settings)
    section = knowledge_section(ks.docs(), Task("t1", "inbox", "x"), 300, "docs/knowledge/")
    assert 0 < len(section.included) < 12
    assert section.omitted == 12 - len(section.included)
    assert estimate_tokens(section.text) <= 300
    assert f"({section.omitted} more docs in docs/knowledge/, left out for space)" in section.text
    assert section.included == [f"conventions/c{n:02d}.md" for n in range(len(section.included))]


def test_default_budget_is_about_2000_tokens(tmp_path: Path) -> None:
    settings = review_settings(tmp_path / "ws")
    for n in range(40):
        write_user_doc(
            settings, f"conventions/c{n:02d}.md", f"# C{n}\n\n## Rules\n\n1. " + "word " * 60 + "\n"
        )
    with open_store(settings) as store:
        text = prompt_sections(settings, store, Task("t1", "inbox", "x"))[0]
    assert 1800 <= estimate_tokens(text) <= 2000


def test_design_docs_are_chosen_by_relevance_to_the_task(tmp_path: Path) -> None:
    settings = review_settings(tmp_path / "ws")
    write_user_doc(
        settings,
        "design/storage.md",
        "# Storage\n\n## Rules\n\n1. Colonies are stored in a dictionary keyed by id.\n",
    )
    write_user_doc(
        settings,
        "design/network.md",
        "# Network\n\n## Rules\n\n1. Retries use exponential backoff.\n",
    )
    with open_store(settings) as store:
        text = prompt_sections(settings, store, Task("t1", "inbox", "Speed up colony storage"))[0]
    assert "Storage (design" in text and "Network" not in text


def test_deprecated_docs_stay_out_of_prompts(tmp_path: Path) -> None:
    settings = review_settings(tmp_path / "ws")
    write_user_doc(
        settings,
        "conventions/old.md",
        "# Old\n\n_Status: deprecated_\n\n## Rules\n\n1. Use tabs.\n",
    )
    with open_store(settings) as store:
        assert prompt_sections(settings, store, Task("t1", "inbox", "x")) == []


def test_doc_format_round_trips() -> None:
    doc = docs.Doc(
        path="conventions/errors.md",
        title="Error Handling Conventions",
        status="provisional",
        writer="style reviewer",
        after_task="gh-12",
        rules=["Raise ToolError", "Never swallow errors"],
        examples="Good:\n  raise ToolError(path)",
        rationale="QA can diagnose.",
    )
    text = docs.render(doc)
    assert "_Last updated by: style reviewer, after task gh-12_" in text
    assert "_Status: provisional_" in text
    back = docs.parse(doc.path, text)
    assert (back.title, back.status, back.writer, back.after_task, back.rules) == (
        doc.title,
        "provisional",
        "style reviewer",
        "gh-12",
        doc.rules,
    )
    assert back.examples == doc.examples and back.rationale == doc.rationale
    assert not back.user_written


def test_provisional_doc_becomes_established_after_n_successful_tasks(tmp_path: Path) -> None:
    settings = review_settings(tmp_path / "ws", {"establish_after": 2})
    ks = KnowledgeStore.for_settings(settings)
    out = DocumentOut(path="conventions/naming.md", title="Naming", rules=["snake_case files"])
    assert ks.write_doc("style", out, "t0") is not None
    with open_store(settings) as store:
        for n, outcome in enumerate([Outcome.SUCCESS, Outcome.FAILURE, Outcome.SUCCESS]):
            task = Task(f"t{n}", "inbox", "x")
            prompt_sections(settings, store, task)
            status_before = ks.doc("conventions/naming.md").status  # type: ignore[union-attr]
            after_task(settings, store, finished(task.id, outcome))
    assert status_before == "provisional"  # a failed task did not count
    assert ks.doc("conventions/naming.md").status == "established"  # type: ignore[union-attr]


def test_reviewer_writes_only_its_own_folder_and_never_over_a_user_doc(tmp_path: Path) -> None:
    settings = review_settings(tmp_path / "ws")
    write_user_doc(settings, "conventions/logging.md", USER_CONVENTION)
    ks = KnowledgeStore.for_settings(settings)
    design_doc = DocumentOut(path="design/arch.md", title="Arch", rules=["One module per idea"])
    over_user = DocumentOut(path="conventions/logging.md", title="Logging", rules=["print()"])
    assert ks.write_doc("style", design_doc, "t1") is None
    assert ks.write_doc("style", over_user, "t1") is None
    assert ks.write_doc("design", design_doc, "t1") is not None
    assert not (ks.root / "design" / "arch.md").read_text().count("print")
    assert "never print()" in (ks.root / "conventions" / "logging.md").read_text()


def test_index_lists_user_and_reviewer_docs_and_follows_changes(tmp_path: Path) -> None:
    settings = review_settings(tmp_path / "ws")
    write_user_doc(settings, "conventions/logging.md", USER_CONVENTION)
    ks = KnowledgeStore.for_settings(settings)
    ks.write_doc(
        "design",
        DocumentOut(path="design/arch.md", title="Architecture", rules=["Pure core"]),
        "t1",
    )
    with open_store(settings) as store:
        after_task(settings, store, finished("t1"))
        index = (ks.root / "_index.md").read_text()
        assert "- [Logging](conventions/logging.md): established; user; 1 rules" in index
        assert (
            "- [Architecture](design/arch.md): provisional; design reviewer after task t1" in index
        )
        (ks.root / "conventions" / "logging.md").unlink()
        after_task(settings, store, finished("t2"))
    assert "logging.md" not in (ks.root / "_index.md").read_text()


def test_task_changes_come_from_the_task_branch_and_heavy_churn_adds_urgency(
    tmp_path: Path,
) -> None:
    """The branch's diff against its merge base gives files and lines; 400+ lines is churn."""
    from worker.process.proc import run_process
    from worker.review.changes import task_changes
    from worker.review.triggers import signals_of, urgency_of

    settings = review_settings(tmp_path / "ws")
    ws = settings.workspace
    env_args = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    for argv in (
        ["init", "-q", "-b", "main"],
        ["commit", "-q", "--allow-empty", "-m", "base"],
        ["checkout", "-q", "-b", "worker/t1"],
    ):
        assert run_process(["git", *env_args, *argv], cwd=ws, timeout_s=30).exit_code == 0
    (ws / "big.py").write_text("".join(f"x{n} = {n}\n" for n in range(450)))
    for argv in (["add", "big.py"], ["commit", "-q", "-m", "big"], ["checkout", "-q", "main"]):
        assert run_process(["git", *env_args, *argv], cwd=ws, timeout_s=30).exit_code == 0
    changes = task_changes(ws, "worker/t1", max_chars=200)
    assert changes.files == ["big.py"] and changes.lines == 450
    assert changes.diff.endswith("[... diff cut ...]")
    signals = signals_of(finished("t1"), changes.lines, settings.review)
    assert signals.churn and urgency_of(signals, settings.review) == 0.2


def test_docs_about_the_task_come_first_in_every_folder(tmp_path: Path) -> None:
    """With more docs than the budget holds, the ones sharing words with the task (a lesson
    included) are in, ahead of the project's general conventions; a design doc about another
    part of the project stays out even with room left."""
    settings = review_settings(tmp_path / "ws", {"token_budget": 260})
    for n in range(6):
        write_user_doc(
            settings,
            f"conventions/general{n}.md",
            f"# General {n}\n\n## Rules\n\n1. Keep functions short, rule {n}: " + "x" * 80 + "\n",
        )
    write_user_doc(
        settings,
        "lessons/parser.md",
        "# Parser\n\n## Rules\n\n1. The tokenizer drops trailing whitespace: check it.\n",
    )
    write_user_doc(
        settings, "design/network.md", "# Network\n\n## Rules\n\n1. Retries use backoff.\n"
    )
    task = Task("t1", "inbox", "Fix the tokenizer", body="trailing whitespace breaks parsing")
    ks = KnowledgeStore.for_settings(settings)
    section = knowledge_section(ks.docs(), task, 260, "docs/knowledge/")
    assert section.included[0] == "lessons/parser.md"
    assert "design/network.md" not in section.included
    assert section.omitted > 0 and estimate_tokens(section.text) <= 260
    roomy = knowledge_section(ks.docs(), task, 5000, "docs/knowledge/")
    assert "design/network.md" not in roomy.included and roomy.omitted == 0
    assert len(roomy.included) == 7

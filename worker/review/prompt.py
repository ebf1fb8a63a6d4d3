"""The `## PROJECT KNOWLEDGE` section: the docs about the task first (their words shared with
it), then the project's other conventions and recent lessons; all within a token budget (spec:
~2k tokens). Pure."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

from worker.models import Task
from worker.review.docs import Doc, for_prompt

_WORD = re.compile(r"[a-z][a-z0-9_]{3,}")
_STOP_WORDS = (
    "this that with from have will should would could into when what which there their them"
    " then than also only some more most make made been being each other about after before"
    " file files code task tasks use used using does done"
)
_STOP = frozenset(_STOP_WORDS.split())
RECENT_LESSONS = 5  # newest items of each lessons doc


def estimate_tokens(text: str) -> int:
    """About four characters a token: good enough to keep a section near its budget."""
    return math.ceil(len(text) / 4)


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def relevance(doc: Doc, task_words: set[str]) -> int:
    doc_words = words(f"{doc.title} {doc.path} {' '.join(doc.rules) or doc.text}")
    return len(doc_words & task_words)


@dataclass
class KnowledgeSection:
    text: str = ""
    included: list[str] = field(default_factory=list)  # doc paths
    omitted: int = 0


def candidates(all_docs: list[Doc], task: Task) -> list[Doc]:
    """Docs in the order they deserve a place: the ones about the task first (conventions,
    then design, domain and lessons, most shared words first), then the project's other
    conventions, then its other recent lessons. A design or domain doc that shares no word
    with the task stays out: it is about another part of the project."""
    active = [doc for doc in all_docs if doc.active]
    task_words = words(f"{task.title} {task.body} {' '.join(task.labels)}")
    scored = [(relevance(doc, task_words), doc) for doc in active]
    order = {"conventions": 0, "design": 1, "domain": 1, "other": 1, "lessons": 2}

    def standing(doc: Doc) -> tuple[bool, bool, float, str]:
        newest = -doc.mtime if doc.folder == "lessons" else 0.0
        return (doc.status != "established", not doc.user_written, newest, doc.title.lower())

    about = sorted(
        ((score, doc) for score, doc in scored if score),
        key=lambda s: (order[s[1].folder], -s[0], standing(s[1])),
    )
    general = sorted(
        (doc for score, doc in scored if not score and doc.folder == "conventions"),
        key=standing,
    )
    lessons = sorted(
        (doc for score, doc in scored if not score and doc.folder == "lessons"),
        key=lambda d: -d.mtime,
    )
    picked = [doc for _, doc in about] + general + lessons
    return [
        replace(doc, rules=doc.rules[::-1][:RECENT_LESSONS])
        if doc.folder == "lessons" and doc.rules
        else doc
        for doc in picked
    ]


def knowledge_section(all_docs: list[Doc], task: Task, budget: int, where: str) -> KnowledgeSection:
    """Fill the section doc by doc until the budget is spent; a doc that does not fit whole
    goes in without its examples, or not at all."""
    picked = candidates(all_docs, task)
    if not picked:
        return KnowledgeSection()
    head = (
        f"## PROJECT KNOWLEDGE\n\nRules and lessons of this project (from {where}). Follow "
        "them. If a rule is wrong for this task, say so in your answer instead of ignoring it."
    )
    reserve = estimate_tokens(f"\n\n({len(picked)} more docs in {where}, left out for space)")
    used = estimate_tokens(head) + reserve
    parts, section = [head], KnowledgeSection()
    for doc in picked:
        for compact in (False, True):
            text = for_prompt(doc, compact=compact)
            cost = estimate_tokens("\n\n" + text)
            if used + cost <= budget:
                parts.append(text)
                section.included.append(doc.path)
                used += cost
                break
        else:
            section.omitted += 1
    if not section.included:
        return KnowledgeSection(omitted=section.omitted)
    if section.omitted:
        parts.append(f"({section.omitted} more docs in {where}, left out for space)")
    section.text = "\n\n".join(parts)
    return section

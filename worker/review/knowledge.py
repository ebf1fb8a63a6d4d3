"""The knowledge store: markdown docs under `docs/knowledge/` (by default), one folder per
owner, and an index kept up to date. Reviewers never write files themselves: they answer in
JSON and this module writes, so a reviewer cannot write outside its own folders, nor over a
doc a user wrote."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from worker.config import Settings
from worker.review import docs
from worker.review.docs import INDEX_NAME, Doc
from worker.review.schema import DocumentOut, KnowledgeItem
from worker.state.fsutil import atomic_write_text

log = logging.getLogger(__name__)

# Spec, "Supervisor Scope Boundaries": none writes another's folder.
OWNERS: dict[str, tuple[str, ...]] = {
    "style": ("conventions",),
    "design": ("design",),
    "knowledge": ("lessons", "domain"),
}
MAX_ITEMS_PER_DOC = 25  # lessons files stay short: the oldest items give way


@dataclass
class Written:
    path: str
    created: bool


class KnowledgeStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def for_settings(cls, settings: Settings) -> KnowledgeStore:
        folder = settings.review.knowledge_dir
        return cls(folder if folder.is_absolute() else settings.workspace / folder)

    # -- reading ------------------------------------------------------------------------------
    def docs(self) -> list[Doc]:
        """Every doc in the store (users' and reviewers'), the index left out."""
        if not self.root.is_dir():
            return []
        found = []
        for path in sorted(self.root.rglob("*.md")):
            rel = path.relative_to(self.root).as_posix()
            if rel == INDEX_NAME or any(part.startswith(".") for part in rel.split("/")):
                continue
            try:
                found.append(
                    docs.parse(rel, path.read_text(encoding="utf-8"), path.stat().st_mtime)
                )
            except (OSError, UnicodeDecodeError) as exc:
                log.warning("knowledge: cannot read %s: %s", path, exc)
        return found

    def doc(self, rel: str) -> Doc | None:
        path = self.root / rel
        if not path.is_file():
            return None
        return docs.parse(rel, path.read_text(encoding="utf-8"), path.stat().st_mtime)

    def docs_in(self, folders: Iterable[str]) -> list[Doc]:
        wanted = set(folders)
        return [doc for doc in self.docs() if doc.folder in wanted]

    # -- writing ------------------------------------------------------------------------------
    def write_doc(self, reviewer: str, out: DocumentOut, task_id: str | None) -> Written | None:
        """Write a reviewer's doc; None (with a warning) outside its folders or over a user doc."""
        folder = out.path.split("/", 1)[0]
        if folder not in OWNERS[reviewer]:
            log.warning(
                "%s reviewer may not write %s (it owns %s): skipped",
                reviewer,
                out.path,
                ", ".join(OWNERS[reviewer]),
            )
            return None
        existing = self.doc(out.path)
        if existing is not None and existing.user_written:
            log.warning(
                "%s reviewer may not overwrite %s, which a user wrote: skipped", reviewer, out.path
            )
            return None
        doc = Doc(
            path=out.path,
            title=out.title,
            status=out.status,
            writer=f"{reviewer} reviewer",
            after_task=task_id,
            rules=list(out.rules),
            examples=out.examples,
            rationale=out.rationale,
        )
        atomic_write_text(self.root / out.path, docs.render(doc))
        return Written(out.path, existing is None)

    def add_items(self, items: list[KnowledgeItem], task_id: str | None) -> list[Written]:
        """Append the knowledge reviewer's items to `lessons/<topic>.md` or `domain/<topic>.md`."""
        groups: dict[str, list[KnowledgeItem]] = {}
        for item in items:
            folder = "lessons" if item.category == "lesson" else "domain"
            rel = f"{folder}/{item.topic or folder}.md"
            groups.setdefault(rel, []).append(item)
        written = []
        for rel, group in groups.items():
            existing = self.doc(rel)
            if existing is not None and existing.user_written:
                log.warning(
                    "knowledge reviewer may not overwrite %s, which a user wrote: skipped", rel
                )
                continue
            rules = list(existing.rules) if existing else []
            for item in group:
                note = f"_(task {item.source_task}, confidence {item.confidence}"
                note += ", needs user review)_" if item.needs_user_review else ")_"
                rules.append(f"{item.content} {note}")
            stem = rel.rsplit("/", 1)[-1].removesuffix(".md")
            doc = Doc(
                path=rel,
                title=existing.title if existing else stem.replace("_", " ").title(),
                status="provisional",
                writer="knowledge reviewer",
                after_task=task_id,
                rules=rules[-MAX_ITEMS_PER_DOC:],
            )
            atomic_write_text(self.root / rel, docs.render(doc))
            written.append(Written(rel, existing is None))
        return written

    def set_status(self, rel: str, status: str) -> None:
        path = self.root / rel
        atomic_write_text(path, docs.set_status(path.read_text(encoding="utf-8"), status))

    def write_index(self) -> bool:
        """Rewrite `_index.md` if what it should say changed; True when it was written."""
        all_docs = self.docs()
        if not all_docs and not (self.root / INDEX_NAME).exists():
            return False
        text = render_index(all_docs)
        path = self.root / INDEX_NAME
        try:
            if path.read_text(encoding="utf-8") == text:
                return False
        except (OSError, UnicodeDecodeError):
            pass
        atomic_write_text(path, text)
        return True


def render_index(all_docs: list[Doc]) -> str:
    lines = [
        "# Knowledge index",
        "",
        "_Kept up to date by worker after each task; edits here are overwritten._",
        "_Write your own docs in the folders below: they count from the next task._",
    ]
    for folder in (*docs.FOLDERS, "other"):
        members = [doc for doc in all_docs if doc.folder == folder]
        if not members:
            continue
        lines += ["", f"## {folder}", ""]
        for doc in members:
            who = "user" if doc.user_written else doc.writer
            after = f" after task {doc.after_task}" if doc.after_task else ""
            lines.append(
                f"- [{doc.title}]({doc.path}): {doc.status}; {who}{after}; {len(doc.rules)} rules"
            )
    return "\n".join(lines) + "\n"

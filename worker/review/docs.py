"""The knowledge doc format (the spec's): a title, who wrote it after which task, a status,
then `## Rules`, `## Examples` and `## Rationale`. Parsing is lenient, because users write
their own docs: a file without a status line counts as established, and one without a
`## Rules` list is shown as it is."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

STATUSES = ("provisional", "established", "deprecated")
FOLDERS = ("conventions", "design", "lessons", "domain")
REVIEWER_WRITERS = ("style reviewer", "design reviewer", "knowledge reviewer")
INDEX_NAME = "_index.md"

_WRITER = re.compile(
    r"(?im)^_Last updated by:\s*(?P<writer>[^,\n]+?)\s*"
    r"(?:,\s*(?:after\s+)?task[ _:]?(?P<task>[^\n]+?))?_\s*$"
)
_STATUS = re.compile(r"(?im)^_Status:\s*(?P<status>[a-z]+)\s*_\s*$")
_SECTION = re.compile(r"(?m)^##\s+(?P<name>.+?)\s*$")
_ITEM = re.compile(r"^\s*(?:\d+[.)]|[-*])\s+(?P<text>.+)$")


@dataclass
class Doc:
    path: str  # relative to the knowledge folder, with forward slashes
    title: str
    status: str = "established"
    writer: str | None = None
    after_task: str | None = None
    rules: list[str] = field(default_factory=list)
    examples: str = ""
    rationale: str = ""
    text: str = ""
    mtime: float = 0.0

    @property
    def folder(self) -> str:
        head = self.path.split("/", 1)[0] if "/" in self.path else ""
        return head if head in FOLDERS else "other"

    @property
    def user_written(self) -> bool:
        return (self.writer or "").lower() not in REVIEWER_WRITERS

    @property
    def active(self) -> bool:
        return self.status != "deprecated"


def parse(path: str, text: str, mtime: float = 0.0) -> Doc:
    """Read a doc; anything missing gets a lenient default."""
    title_match = re.search(r"(?m)^#\s+(.+?)\s*$", text)
    title = title_match.group(1) if title_match else path.rsplit("/", 1)[-1].removesuffix(".md")
    doc = Doc(path=path, title=title, text=text, mtime=mtime)
    writer = _WRITER.search(text)
    if writer:
        doc.writer = writer.group("writer").strip()
        doc.after_task = (writer.group("task") or "").strip() or None
    status = _STATUS.search(text)
    if status and status.group("status").lower() in STATUSES:
        doc.status = status.group("status").lower()
    elif not doc.user_written:
        doc.status = "provisional"  # a reviewer's doc with a broken status line earns nothing
    sections = _sections(text)
    doc.rules = [
        m.group("text").strip()
        for line in sections.get("rules", "").splitlines()
        if (m := _ITEM.match(line))
    ]
    doc.examples = sections.get("examples", "").strip()
    doc.rationale = sections.get("rationale", "").strip()
    return doc


def _sections(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    matches = list(_SECTION.finditer(text))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        found.setdefault(match.group("name").strip().lower(), text[match.end() : end])
    return found


def render(doc: Doc) -> str:
    """The doc as markdown, in the spec's format."""
    meta = f"_Last updated by: {doc.writer or 'user'}"
    if doc.after_task:
        meta += f", after task {doc.after_task}"
    parts = [f"# {doc.title}", "", meta + "_", f"_Status: {doc.status}_", "", "## Rules", ""]
    parts += [f"{n}. {rule}" for n, rule in enumerate(doc.rules, start=1)]
    if doc.examples:
        parts += ["", "## Examples", "", doc.examples.rstrip()]
    if doc.rationale:
        parts += ["", "## Rationale", "", doc.rationale.rstrip()]
    return "\n".join(parts) + "\n"


def set_status(text: str, status: str) -> str:
    """The same text with its status line changed (or added under the title)."""
    if _STATUS.search(text):
        return _STATUS.sub(f"_Status: {status}_", text, count=1)
    lines = text.splitlines()
    at = next((i + 1 for i, line in enumerate(lines) if line.startswith("# ")), 0)
    lines[at:at] = ["", f"_Status: {status}_"]
    return "\n".join(lines) + "\n"


def for_prompt(doc: Doc, compact: bool = False) -> str:
    """The doc as it goes into a prompt: rules (and examples unless compact), no metadata
    beyond the status. A user doc without a rules list goes in as written."""
    head = f"### {doc.title} ({doc.folder}, {doc.status})"
    if not doc.rules:
        body = _without_title(doc.text).strip()
        return f"{head}\n{body}"
    lines = [head, *(f"{n}. {rule}" for n, rule in enumerate(doc.rules, start=1))]
    if doc.examples and not compact:
        lines += ["Examples:", doc.examples]
    return "\n".join(lines)


def _without_title(text: str) -> str:
    lines = [
        line
        for line in text.splitlines()
        if not line.startswith("# ") and not _WRITER.match(line) and not _STATUS.match(line)
    ]
    return "\n".join(lines)

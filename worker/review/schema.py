"""The reviewers' JSON answers (the spec's output schemas), validated strictly.

The spec's schemas are kept field for field. Two additions: `documents` carries the content of
the knowledge docs a reviewer writes (worker writes the files, so folder ownership is enforced
here and not left to the agent), and `converging` is the reviewer's own convergence report.
An answer that does not validate is discarded whole.
"""

from __future__ import annotations

import json
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from worker.errors import MalformedInput, describe_validation

_FENCE = re.compile(r"^```(?:json)?\s*\n(?P<body>.*)\n```\s*$", re.DOTALL)
DOC_PATH = re.compile(r"^(?P<folder>[a-z]+)/(?P<name>[a-z0-9][a-z0-9_-]{0,60})\.md$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class DirectiveOut(_Strict):
    type: Literal["functional", "cleanup"]
    description: str = Field(min_length=1, max_length=400)  # spec: ~200 chars
    rationale: str = Field("", max_length=400)
    priority: Literal["critical", "normal", "low"] = "normal"
    files: list[str] = Field(default_factory=list, max_length=30)

    @field_validator("files")
    @classmethod
    def _relative(cls, files: list[str]) -> list[str]:
        for path in files:
            if not path or path.startswith(("/", "\\")) or ".." in path.split("/"):
                raise ValueError(f"files must be relative paths inside the workspace: {path!r}")
        return files


class DocumentOut(_Strict):
    """A knowledge doc in the spec's format: rules, examples, rationale."""

    path: str  # "conventions/error_handling.md"
    title: str = Field(min_length=1, max_length=120)
    rules: list[str] = Field(min_length=1, max_length=12)
    examples: str = Field("", max_length=1500)
    rationale: str = Field("", max_length=800)
    status: Literal["provisional", "deprecated"] = "provisional"  # established is earned

    @field_validator("path")
    @classmethod
    def _doc_path(cls, path: str) -> str:
        if not DOC_PATH.match(path):
            raise ValueError("path must look like 'conventions/name.md' (lowercase, no subfolders)")
        return path

    @field_validator("rules")
    @classmethod
    def _short_rules(cls, rules: list[str]) -> list[str]:
        # spec: "500 chars or less for the rules section"
        if sum(len(rule) for rule in rules) > 600 or any(not rule.strip() for rule in rules):
            raise ValueError("rules must be non-empty and short (about 500 characters in all)")
        return rules


class StyleAnswer(_Strict):
    conventions_updated: list[str]
    documents: list[DocumentOut] = Field(default_factory=list, max_length=8)
    directives: list[DirectiveOut] = Field(default_factory=list, max_length=10)
    summary: str = Field(max_length=1000)
    converging: bool = False


class DesignAnswer(_Strict):
    design_updates: list[str]
    documents: list[DocumentOut] = Field(default_factory=list, max_length=8)
    directives: list[DirectiveOut] = Field(default_factory=list, max_length=10)
    summary: str = Field(max_length=1000)
    converging: bool = False


class KnowledgeItem(_Strict):
    category: Literal["lesson", "domain"]
    content: str = Field(min_length=1, max_length=400)
    source_task: str = Field(max_length=200)
    confidence: Literal["high", "medium", "low"]
    needs_user_review: bool = False
    topic: str | None = Field(None, pattern=r"^[a-z0-9][a-z0-9_-]{0,40}$")  # file name, no .md


class KnowledgeAnswer(_Strict):
    knowledge_items: list[KnowledgeItem] = Field(max_length=20)
    summary: str = Field(max_length=1000)
    converging: bool = False


Answer = StyleAnswer | DesignAnswer | KnowledgeAnswer
ANSWER_MODELS: dict[str, type[StyleAnswer] | type[DesignAnswer] | type[KnowledgeAnswer]] = {
    "style": StyleAnswer,
    "design": DesignAnswer,
    "knowledge": KnowledgeAnswer,
}


def parse_answer(reviewer: str, text: str) -> Answer:
    """The reviewer's final text as its answer model; MalformedInput says what was wrong.

    The whole text must be one JSON object (a single ```json fence around it is tolerated)."""
    body = (text or "").strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group("body").strip()
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise MalformedInput(f"{reviewer} reviewer: answer is not JSON: {exc.msg}") from exc
    if not isinstance(data, dict):
        raise MalformedInput(f"{reviewer} reviewer: answer is not a JSON object")
    try:
        return ANSWER_MODELS[reviewer].model_validate(data)
    except ValidationError as exc:
        problems = describe_validation(exc)
        raise MalformedInput(
            f"{reviewer} reviewer: answer does not fit the schema: {problems}"
        ) from exc


def findings_of(answer: Answer) -> list[str]:
    """The answer's findings as short texts, to compare one run with the previous one."""
    if isinstance(answer, KnowledgeAnswer):
        return [item.content for item in answer.knowledge_items]
    found = [d.description for d in answer.directives]
    found += [f"{doc.path}: {' '.join(doc.rules)}" for doc in answer.documents]
    return found

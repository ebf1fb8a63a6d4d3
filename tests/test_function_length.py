"""Functions fit on a screen: none in the `worker` package is longer than LIMIT lines.

A function that does several named steps (gather, act, verify, decide what comes next) calls
them instead of holding them all; a reader then walks the steps top-down, and each step can be
read, named and changed on its own.
"""

from __future__ import annotations

import ast
from pathlib import Path

import worker

LIMIT = 80  # lines, from the `def` line to the last line of the body
PACKAGE = Path(worker.__file__).resolve().parent


def long_functions(source: str, limit: int) -> list[tuple[str, int]]:
    """(qualified name, length in lines) of each function in `source` longer than `limit`.

    Decorators are left out of the length; a nested function counts on its own and as part of
    the function that holds it."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    lines = (child.end_lineno or child.lineno) - child.lineno + 1
                    if lines > limit:
                        found.append((name, lines))
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def test_no_function_in_the_worker_package_is_over_the_limit() -> None:
    """Every module of `worker/`, the core path (run, loop, process, kernel) included."""
    found = [
        f"{path.relative_to(PACKAGE.parent).as_posix()}: {name} ({lines} lines)"
        for path in sorted(PACKAGE.rglob("*.py"))
        for name, lines in long_functions(path.read_text(encoding="utf-8"), LIMIT)
    ]
    assert found == [], f"over {LIMIT} lines; split into named steps:\n" + "\n".join(found)


def test_the_check_finds_a_long_method_and_names_it_with_its_class() -> None:
    """The measure the package test relies on: a long method is found and named `Class.name`,
    a nested function inside it too when it is long itself, and a short function is not."""
    body = "        x = 1\n" * 85
    nested = "        def inner():\n" + "            y = 2\n" * 84
    source = f"class A:\n    def f(self):\n{body}{nested}\n\ndef g():\n    return 1\n"
    assert long_functions(source, LIMIT) == [("A.f", 171), ("A.f.inner", 85)]
    assert long_functions(source, 200) == []

"""The import graph of `worker/`: no cycles, and every import runs down the layers.

Read with `ast`, not by importing: every `import` and `from ... import` counts, at the top of a
module or inside a function (a function-local import is a dependency all the same, only a later
one). Exempt: imports under `if TYPE_CHECKING:`, which never run; they name types for mypy.

`LAYERS` is the order, top first. A module may import from its own layer and from any layer
below it, never from a layer above. Each layer names its modules: an exact name, or `pkg.*` for
every module under `pkg`; an exact name wins over a pattern, a longer pattern over a shorter
one. A new module falls in its package's layer; a module no layer names fails the test.
docs/architecture.md draws the same layers.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

WORKER = Path(__file__).resolve().parents[1] / "worker"


@dataclass(frozen=True)
class Layer:
    name: str
    why: str
    modules: tuple[str, ...]


LAYERS: tuple[Layer, ...] = (
    Layer(
        "cli",
        "Commands: each parses its options, calls one service and prints the result; Rich "
        "(`ui`) is used here only.",
        (
            "worker.__main__",
            "worker.cli",
            "worker.cli.*",
        ),
    ),
    Layer(
        "daemon",
        "The long-running processes: `worker serve` runs runs in one process, `worker "
        "supervise` keeps it alive and promotes or rolls back revisions; `worker dashboard` "
        "serves the web page.",
        (
            "worker.daemon",
            "worker.daemon.*",
            "worker.web",
            "worker.web.*",
        ),
    ),
    Layer(
        "run",
        "One `worker run`: lock, snapshot, decision, claim, then the chosen task (`run_once`, "
        "the library API).",
        (
            "worker.run",
            "worker.run.runner",
        ),
    ),
    Layer(
        "task",
        "One chosen task carried out: start or resume, the loop under the stop watcher, the "
        "checks, the reviewers, the report, the release.",
        ("worker.run.tasks",),
    ),
    Layer(
        "operator",
        "What people are told and may ask between runs: notifications and Telegram's commands, "
        "`status`, `queue`, `doctor`, `submit`, the integrity view.",
        (
            "worker.operator",
            "worker.operator.*",
        ),
    ),
    Layer(
        "loop",
        "Gather, act, verify around the agent, iteration by iteration: the prompt, the STATUS "
        "block, budgets and spend, infrastructure failures, the workspace guard.",
        ("worker.run.*",),
    ),
    Layer(
        "kernel",
        "The scheduling kernel at work: the snapshot a run decides on, orders from every "
        "channel, the stop watcher, carrying out a decision.",
        ("worker.kernel.*",),
    ),
    Layer(
        "fleet",
        "Many machines, one PostgreSQL: the session around a run, claims, history, reports, "
        "orders.",
        ("worker.fleet", "worker.fleet.*"),
    ),
    Layer(
        "waits",
        "Wait states at work: phase 0 (expire, test readiness, resume the ready), the resume "
        "conditions, the service behind `worker waits` and `worker intercom`.",
        ("worker.waits", "worker.waits.*"),
    ),
    Layer(
        "sources",
        "Where tasks come from, behind `TaskSource`: the inbox, GitHub issues, the fallback "
        "checks, and their registry in priority order.",
        ("worker.sources", "worker.sources.*"),
    ),
    Layer(
        "review",
        "Reviewer agents every N tasks: directives and the knowledge store later prompts include.",
        ("worker.review", "worker.review.*"),
    ),
    Layer(
        "decision",
        "The kernel's pure core, `decide(snapshot)` with its model and invariants, and what a "
        "control order is (`control`: how it is read, written and consumed; `order_file`: its "
        "format).",
        (
            "worker.kernel",
            "worker.kernel.control",
            "worker.kernel.decide",
            "worker.kernel.explain",
            "worker.kernel.invariants",
            "worker.kernel.model",
            "worker.kernel.order_file",
            "worker.kernel.registry",
            "worker.kernel.replies",
            "worker.kernel.turn",
            "worker.kernel.scheduling",
        ),
    ),
    Layer(
        "records",
        "What tasks leave behind, as files and rows: wait states and their ledger, signed "
        "notes, inbox messages, a source's listing.",
        (
            "worker.waits.authored",
            "worker.waits.ledger",
            "worker.waits.record",
            "worker.waits.saving",
            "worker.waits.state",
            "worker.waits.validate",
            "worker.sources.base",
            "worker.sources.inbox_index",
            "worker.sources.message",
            "worker.state.known_tasks",
            "worker.state.dead_runs",
            # the notifications' outbox, its channels and a pull request's moments: the waits
            # tell a merge or a failed check as it happens
            "worker.operator.notify",
            "worker.operator.notify.channels",
            "worker.operator.notify.moments",
            "worker.operator.notify.outbox",
        ),
    ),
    Layer(
        "supervision",
        "The supervisor: detectors (pure over the agent's events), the escalation ladder, "
        "steering, status reports.",
        ("worker.supervision", "worker.supervision.*"),
    ),
    Layer(
        "agents",
        "One adapter per agent CLI, each turning its output into `AgentEvent`s; the preflight "
        "that an agent can start.",
        ("worker.agents", "worker.agents.*"),
    ),
    Layer(
        "base",
        "What every part may use: the SQLite store, the process chokepoint, files, git, the "
        "platform, modes, the STATUS parser, run records and retention.",
        (
            "worker.humanize",
            "worker.modes",
            "worker.process",
            "worker.process.*",
            "worker.sandbox",
            "worker.sandbox.*",
            "worker.state",
            "worker.state.*",
            "worker.status",
        ),
    ),
    Layer(
        "settings",
        "Settings and domain types: worker.toml and WORKER_* validated, each part's settings "
        "model, the domain types, the errors, the state folder.",
        (
            "worker",
            "worker.config",
            "worker.config_bounds",
            "worker.config_fallback",
            "worker.config_keys",
            "worker.config_load",
            "worker.config_origin",
            "worker.config_sections",
            "worker.delivery",
            "worker.daemon.settings",
            "worker.errors",
            "worker.fleet.settings",
            "worker.state.folders",
            "worker.models",
            "worker.operator.notify.settings",
            "worker.results",
            "worker.secrets",
            "worker.state.retention_settings",
            "worker.review.settings",
            "worker.sandbox.settings",
            "worker.sources.github.settings",
            "worker.state.statedir",
            "worker.supervision.settings",
            "worker.waits.settings",
        ),
    ),
)


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    line: int
    local: bool  # inside a function

    def __str__(self) -> str:
        where = "inside a function" if self.local else "at the top"
        return f"{self.source} -> {self.target} (line {self.line}, {where})"


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package at `root`, by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _type_checking_only(tree: ast.Module) -> set[int]:
    """The ids of the import nodes under `if TYPE_CHECKING:` (the `else` branch runs)."""
    exempt: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        test = node.test
        name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
        if name == "TYPE_CHECKING":
            exempt |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return exempt


def _imports_in(
    tree: ast.AST, local: bool = False
) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.Import | ast.ImportFrom):
            found.append((child, local))
        inner = local or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
        found += _imports_in(child, inner)
    return found


def _known(name: str, known: dict[str, Path]) -> str | None:
    """The module a dotted name is in: itself, or the nearest package or module above it."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(root: Path) -> list[Import]:
    """Every import from one module of the package at `root` into another."""
    known = modules(root)
    found = []
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        exempt = _type_checking_only(tree)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node, local in _imports_in(tree):
            if id(node) in exempt:
                continue
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, *([base] if base else [])])
                # `from pkg import mod` depends on pkg.mod; `from mod import name`, on mod.
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                    for alias in node.names
                ]
            for target in dict.fromkeys(_known(t, known) for t in targets):
                if target is not None and target != name:
                    found.append(Import(name, target, node.lineno, local))
    return found


def layer_of(module: str, layers: tuple[Layer, ...] = LAYERS) -> int | None:
    """The index in `layers` of the layer that names `module` most closely."""
    best: tuple[tuple[bool, int], int] | None = None
    for index, layer in enumerate(layers):
        for pattern in layer.modules:
            if pattern.endswith(".*"):
                matches = module.startswith(pattern[:-1])
            else:
                matches = module == pattern
            rank = (not pattern.endswith(".*"), len(pattern))
            if matches and (best is None or rank > best[0]):
                best = (rank, index)
    return best[1] if best else None


def cycles(edges: list[Import]) -> list[list[Import]]:
    """One cycle, named edge by edge, per strongly connected group of modules."""
    graph: dict[str, dict[str, Import]] = {}
    for edge in edges:
        graph.setdefault(edge.source, {}).setdefault(edge.target, edge)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_one_cycle(graph, group) for group in groups]


def _one_cycle(graph: dict[str, dict[str, Import]], group: set[str]) -> list[Import]:
    """A shortest way from the group's first module back to itself, inside the group."""
    start = min(group)
    paths: dict[str, list[Import]] = {start: []}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt, edge in sorted(graph.get(node, {}).items()):
            if nxt == start:
                return [*paths[node], edge]
            if nxt in group and nxt not in paths:
                paths[nxt] = [*paths[node], edge]
                queue.append(nxt)
    raise AssertionError(f"no cycle through {start}")  # a strongly connected group has one


def upward(edges: list[Import], layers: tuple[Layer, ...] = LAYERS) -> list[str]:
    """Each import from a lower layer into a higher one, with both modules and layers named."""
    found = []
    for edge in edges:
        source, target = layer_of(edge.source, layers), layer_of(edge.target, layers)
        if source is not None and target is not None and target < source:
            found.append(
                f"{edge} imports up: {edge.source} is in layer {layers[source].name!r}, "
                f"{edge.target} in the higher layer {layers[target].name!r}"
            )
    return found


def test_worker_has_no_import_cycle() -> None:
    """No chain of imports in worker/ comes back to where it started (function-local
    imports included)."""
    found = cycles(imports(WORKER))
    assert not found, "import cycles (module:line of each import):\n" + "\n".join(
        " -> ".join([*(f"{e.source}:{e.line}" for e in cycle), cycle[0].source]) for cycle in found
    )


def test_worker_imports_run_down_the_layers() -> None:
    """No module imports from a layer above its own."""
    found = upward(imports(WORKER))
    assert not found, "\n".join(found)


def test_every_module_has_a_layer() -> None:
    """A new module is placed in a layer (its package's, or one named for it)."""
    unplaced = [name for name in modules(WORKER) if layer_of(name) is None]
    assert not unplaced, f"add these to a layer in LAYERS: {unplaced}"


def test_every_layer_names_modules_that_exist() -> None:
    """The layer data stays true to the code: a name or pattern nothing matches (a module
    moved or renamed) fails, and no exact name is given two layers."""
    names = set(modules(WORKER))
    stale = [
        pattern
        for layer in LAYERS
        for pattern in layer.modules
        if not any(
            name.startswith(pattern[:-1]) if pattern.endswith(".*") else name == pattern
            for name in names
        )
    ]
    assert not stale, f"no module matches {stale}"
    exact = [p for layer in LAYERS for p in layer.modules if not p.endswith(".*")]
    assert len(exact) == len(set(exact)), "a module is named in two layers"
    assert all(layer.why.strip() for layer in LAYERS)


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_a_cycle_through_a_function_local_import_is_named(tmp_path: Path) -> None:
    """The checker itself: a cycle closed by an import inside a function is found, and named
    module by module; a `TYPE_CHECKING` import closes none."""
    root = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg.b import x\n",
            "pkg/b.py": "def x():\n    from pkg import c\n    return c\n",
            "pkg/c.py": "from . import a\n",
            "pkg/d.py": "import typing\nif typing.TYPE_CHECKING:\n    from pkg import a\n",
            "pkg/e.py": "import pkg.d\n",
        },
    )
    edges = imports(root)
    assert {(e.source, e.target, e.local) for e in edges} == {
        ("pkg.a", "pkg.b", False),
        ("pkg.b", "pkg.c", True),
        ("pkg.c", "pkg.a", False),
        ("pkg.e", "pkg.d", False),
    }
    [cycle] = cycles(edges)
    assert [e.source for e in cycle] == ["pkg.a", "pkg.b", "pkg.c"]
    assert cycle[-1].target == "pkg.a"


def test_an_upward_import_names_both_modules_and_layers(tmp_path: Path) -> None:
    """The checker itself: an import from a lower layer into a higher one is reported with
    both modules; imports down the layers and inside one layer are not."""
    root = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/top.py": "from pkg import low\n",
            "pkg/low.py": "from pkg.deep import leaf\n",
            "pkg/deep/__init__.py": "",
            "pkg/deep/leaf.py": "import pkg.top\nimport pkg.deep.other\n",
            "pkg/deep/other.py": "",
        },
    )
    layers = (
        Layer("top", "the top", ("pkg.top",)),
        Layer("middle", "the middle", ("pkg.*",)),
        Layer("bottom", "the bottom", ("pkg.deep.*", "pkg.deep")),
    )
    assert layer_of("pkg.deep.leaf", layers) == 2  # the longer pattern wins
    assert layer_of("pkg", layers) is None
    [found] = upward(imports(root), layers)
    assert "pkg.deep.leaf -> pkg.top" in found
    assert "'bottom'" in found and "'top'" in found


def _names_what_exists(name: str) -> bool:
    """A path from worker/ or the repository, or `module.attribute` defined in that module; a
    dotted word whose first part is not a module of ours (`worker.toml`) is not a code name."""
    if (WORKER / name).exists() or (WORKER.parent / name).exists():
        return True
    module, _, attrs = name.partition(".")
    attr = attrs.split(".")[0]  # `module.Class.method`: the class is looked for
    files = [WORKER / f"{module}.py", WORKER / module / "__init__.py"]
    path = next((f for f in files if f.exists()), None)
    if path is None:
        return "/" not in name
    defined = rf"^\s*(def|class) {attr}\b|^{attr}\s*[:=]|^from .* import .*\b{attr}\b"
    return re.search(defined, path.read_text(encoding="utf-8"), re.M) is not None


def test_the_architecture_page_names_what_exists() -> None:
    """docs/architecture.md stays true to the code: every module, folder or function it names
    in backticks (`kernel/orders.py`, `sources/github/`, `runner.run_once`) exists, and it
    draws every layer of `LAYERS`, in order."""
    page = (WORKER.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    names = re.findall(r"`([a-z_]+(?:/[a-z_]+)*(?:/|(?:\.[A-Za-z_]+)+))`", page)
    missing = [name for name in dict.fromkeys(names) if not _names_what_exists(name)]
    assert not missing, f"docs/architecture.md names what does not exist: {missing}"
    drawn = re.findall(r"^ ([a-z]+) ", page, re.M)
    assert drawn == [layer.name for layer in LAYERS]

"""The shape of the code, kept: no import cycles, and each stage imports only the stages before it.

Read from the source with `ast` (every import, also those inside functions; not those under
TYPE_CHECKING, which never run). The stages are tasks/'s sub-packages, in the data's order
(docs/architecture.md): a stage may import a stage listed after it, never one before it. Fetch and
land are siblings that meet only through staged files: neither imports the other.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("connectors", "tasks", "flows")
HOME = "fleet_data"  # the one import name of the installed code (pyproject.toml maps it to the checkout's root)

# Highest first: a module may import from its own layer or any layer below it.
LAYERS: list[tuple[str, ...]] = [
    ("flows",),
    ("tasks.steps",),
    ("tasks.outputs",),
    ("tasks.recalls",),  # a batch's results land before its details are asked for: recalls fetch and land
    ("tasks.land", "tasks.fetch"),  # independent siblings
    ("tasks.plan",),
    ("tasks.ingest",),
    ("tasks.run",),
    ("tasks.staging",),
    ("tasks.store",),
    ("tasks.control",),
    ("tasks.settings",),
    ("tasks.datasets",),
    ("tasks.errors",),  # the error tree (FleetError), each kind with its exit code: every stage raises them
    ("tasks.exitcodes",),  # the table of exit codes
    ("connectors",),
]



def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The project modules `path` imports (resolved to modules, not names inside them)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if _type_checking(node):
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    resolved = set()
    for target in found:
        target = target.removeprefix(f"{HOME}.")  # the installed name; the graph speaks of the checkout's folders
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name and not name.startswith(target + "."):  # a package's own __init__ is no edge
            resolved.add(target)
    return resolved


def import_graph() -> dict[str, set[str]]:
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py") if "node_modules" not in p.parts]
    modules = {module_name(p) for p in files}
    return {module_name(p): imports_of(p, modules) for p in files}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return found


def layer_of(module: str) -> tuple[int, str] | None:
    for depth, layer in enumerate(LAYERS):
        for prefix in layer:
            if module == prefix or module.startswith(prefix + "."):
                return depth, prefix
    return None


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    wrong = []
    for source, targets in sorted(graph.items()):
        mine = layer_of(source)
        for target in sorted(targets):
            theirs = layer_of(target)
            if mine is None or theirs is None:
                continue
            if theirs[0] < mine[0] or (theirs[0] == mine[0] and theirs[1] != mine[1]):
                wrong.append(f"{source} imports {target} ({mine[1]} may not import {theirs[1]})")
    return wrong


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def test_stages_import_only_the_stages_before_them() -> None:
    assert layer_violations(import_graph()) == []


def test_every_tasks_module_has_a_stage() -> None:
    unplaced = [m for m in import_graph() if layer_of(m) is None and m != "tasks"]
    assert unplaced == []


def test_the_checks_catch_a_cycle_and_a_backward_import() -> None:
    graph = {"tasks.fetch.a": {"tasks.land.b"}, "tasks.land.b": {"tasks.fetch.a"}, "tasks.store.c": {"tasks.plan.d"}}
    assert cycles(graph) == [["tasks.fetch.a", "tasks.land.b"]]
    assert len(layer_violations(graph)) == 3


MAX_LINES, MAX_PARAMETERS = 60, 8


def oversized() -> dict[tuple[str, str], tuple[int, int]]:
    """Every function of the shipped code over MAX_LINES lines (docstring included) or MAX_PARAMETERS parameters
    (self and cls aside; *args and **kwargs count one each): (lines, parameters)."""
    found = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            if "node_modules" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    a = node.args
                    named = [x for x in (*a.posonlyargs, *a.args, *a.kwonlyargs) if x.arg not in ("self", "cls")]
                    parameters = len(named) + bool(a.vararg) + bool(a.kwarg)
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > MAX_LINES or parameters > MAX_PARAMETERS:
                        found[(str(path.relative_to(ROOT)), node.name)] = (lines, parameters)
    return found


def test_functions_are_short_and_take_few_parameters() -> None:
    assert oversized() == {}


def test_the_code_imports_itself_by_its_one_name():
    """`fleet_data.tasks...`, never a top-level `tasks`: the name a Dask or Prefect worker resolves from the wheel."""
    files = [p for pkg in (*PACKAGES, "tests") for p in (ROOT / pkg).rglob("*.py") if "node_modules" not in p.parts]
    bare = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            bare += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names if n.split(".")[0] in PACKAGES]
    assert bare == [], "import these as fleet_data.<...>:\n" + "\n".join(bare)

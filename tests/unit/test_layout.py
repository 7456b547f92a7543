"""The engine's shape (issue 31, docs/architecture.md): small modules, no import circle, no
private name imported from another module, imports at the top of a module unless one inside a
function says why it is there, and each room importing only the rooms below it."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "src" / "medallion"
MODULES = sorted(SOURCE.rglob("*.py"))


def test_no_module_is_over_400_lines():
    long = {
        str(p.relative_to(SOURCE)): n
        for p in MODULES
        if (n := len(p.read_text().splitlines())) > 400
    }
    assert not long, long


def test_every_import_inside_a_function_says_why_it_is_deferred():
    """A cycle it breaks, or the heavy or optional dependency it defers: a ``# deferred:``
    comment heads each run of imports inside a function."""
    unexplained = []
    for path in MODULES:
        lines = path.read_text().splitlines()
        for function in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for first in _first_imports_of_runs(function):
                    if not lines[first.lineno - 2].strip().startswith("# deferred:"):
                        unexplained.append(f"{path.relative_to(SOURCE)}:{first.lineno}")
    assert not unexplained, sorted(set(unexplained))


def _first_imports_of_runs(function: ast.AST) -> list[ast.stmt]:
    """The first import of each run of consecutive import statements in ``function``'s bodies
    (its own, and those of the blocks inside it)."""
    firsts = []
    for node in ast.walk(function):
        for name in ("body", "orelse", "finalbody", "handlers"):
            statements = getattr(node, name, None)
            if not isinstance(statements, list):
                continue
            previous_is_import = False
            for statement in statements:
                is_import = isinstance(statement, (ast.Import, ast.ImportFrom))
                if is_import and not previous_is_import:
                    firsts.append(statement)
                previous_is_import = is_import
    return firsts


def _module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) of every import in ``path`` that runs: at its top or inside a function,
    not those for type checkers only (``if TYPE_CHECKING:``); relative ones made absolute."""
    tree = ast.parse(path.read_text())
    typing_only = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for node in ast.walk(block)
    }
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.append((module, [alias.name for alias in node.names]))
    return found


def _import_graph() -> dict[str, set[str]]:
    """Each module of the package, with the package's modules it imports (itself left out)."""
    modules = {_module_name(p): p for p in MODULES}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = set()
        for module, names in _imports(path):
            targets = [module, *(f"{module}.{n}" for n in names)]
            # A package's own modules are not its dependencies (``medallion.streams`` imports
            # nothing of its children by being their parent).
            graph[name] |= {t for t in targets if t in modules and not name.startswith(f"{t}.")}
        graph[name].discard(name)
    return graph


def test_no_import_circle_and_no_private_name_across_modules():
    graph = _import_graph()
    private = [
        f"{_module_name(path)}: {module}.{n}"
        for path in MODULES
        for module, names in _imports(path)
        if module.startswith("medallion")
        for n in names
        if _is_private(n)
    ]
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as error:
        raise AssertionError(f"import circle: {' -> '.join(error.args[1])}") from None
    assert not private, private


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


# The engine's rooms and what each may import (docs/architecture.md draws this): a room below
# never imports one above it. The entry points (commands, notebooks' and job tasks' calls, the
# dashboards) sit on top and may import every room.
ENTRY_POINTS = {
    "medallion.argtypes",
    "medallion.bundle.cli",
    "medallion.class_archive_training",
    "medallion.cli",
    "medallion.cli_arguments",
    "medallion.cli_parser",
    "medallion.dashboards",
    "medallion.data_commands",
    "medallion.explore",
    "medallion.layers",
    "medallion.ops.cli",
    "medallion.ops.dashboard",
    "medallion.ops.governance_cli",
    "medallion.run_command",
    "medallion.task_params",
}
MAY_IMPORT = {
    "core": (),
    "transforms": ("core",),
    "streams": ("core", "transforms"),
    "pipelines": ("core", "transforms", "streams"),
    "bundle": ("core",),
    "ops": ("core", "transforms", "streams", "bundle"),
    "entry points": ("core", "transforms", "streams", "pipelines", "bundle", "ops"),
}


def room_of(module: str) -> str:
    """The room of a module of the package: ``core`` is every top-level module that is not an
    entry point, with the registry (``medallion.pipelines``); ``pipelines`` the pipelines'
    packages."""
    if module in ENTRY_POINTS:
        return "entry points"
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "pipelines":
        return "pipelines"
    if len(parts) > 1 and parts[1] in ("transforms", "streams", "ops", "bundle"):
        return parts[1]
    return "core"


def test_each_room_imports_only_the_rooms_it_may():
    graph = _import_graph()
    crossing = [
        f"{name} ({room_of(name)}) -> {target} ({room_of(target)})"
        for name, targets in graph.items()
        for target in targets
        if room_of(target) not in {room_of(name), *MAY_IMPORT[room_of(name)]}
    ]
    assert not crossing, crossing
    assert {room_of(n) for n in graph} == set(MAY_IMPORT)


def rooms_mermaid() -> str:
    """The rooms and what each may import, as a Mermaid flowchart (top: the entry points)."""
    ids = {room: room.replace(" ", "_") for room in MAY_IMPORT}
    lines = ["flowchart TD"]
    for room, below in MAY_IMPORT.items():
        lines += [f'  {ids[room]}["{room}"] --> {ids[other]}["{other}"]' for other in below]
    return "\n".join(lines) + "\n"


def test_the_architecture_page_draws_the_rooms_as_the_layout_rules_give_them():
    page = (SOURCE.parents[1] / "docs" / "architecture.md").read_text()
    block = page.split("```mermaid\n", 1)[1].split("```", 1)[0]
    assert block == rooms_mermaid()


def test_config_is_a_plain_value_that_knows_no_pipeline():
    """Where things live and how streams run, with no lookup into the registry: what a Config
    means for the pipelines is medallion/deployment.py's."""
    imported = {module for module, _ in _imports(SOURCE / "config.py")}
    registry = {"medallion.pipelines", "medallion.deployment", "medallion.expectations"}
    assert not imported & registry, imported & registry
    assert not {m for m in imported if m.startswith("medallion.pipelines.")}

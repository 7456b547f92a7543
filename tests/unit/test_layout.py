"""The engine's shape (issue 31, docs/architecture.md): small modules, and imports at the top of
a module unless one inside a function says why it is there."""

from __future__ import annotations

import ast
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

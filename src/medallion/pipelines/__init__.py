"""The pipelines medallion runs, found by registration: each package under
``medallion/pipelines/`` declares one and calls :func:`register` when it is imported, and so
does each module named in ``$MEDALLION_PIPELINES`` (comma-separated module names: pipelines
kept outside this package, such as a team's own or a test's).

Lookups import the packages the first time they are needed, never at import time, so the
engine's modules and the pipelines' may import each other's names freely.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, TypeVar

from medallion.declarations import Flow, Pipeline, Table, landing_datasets
from medallion.pipeline_settings import AnySetting

if TYPE_CHECKING:
    from medallion.contract_rules import Contract

T = TypeVar("T")

EXTRA_PIPELINES_VARIABLE = "MEDALLION_PIPELINES"
_REGISTERED: dict[str, Pipeline] = {}
# The folder of the package that declares each discovered pipeline.
_FOLDERS: dict[str, Path] = {}
_discovered = False
# The names of the pipelines discovery found (the package's and $MEDALLION_PIPELINES'):
# registered() leaves them registered.
_DISCOVERED: set[str] = set()


def register(pipeline: Pipeline) -> Pipeline:
    """Add ``pipeline`` to those medallion runs; its table keys and flow names must be new."""
    if pipeline.name in _REGISTERED:
        if _REGISTERED[pipeline.name] is pipeline:
            return pipeline
        raise ValueError(f"a pipeline named {pipeline.name!r} is registered already")
    tables = {t.key for p in _REGISTERED.values() for t in p.tables}
    flows = {f.name for p in _REGISTERED.values() for f in p.flows}
    for table in pipeline.tables:
        if table.key in tables:
            raise ValueError(f"pipeline {pipeline.name!r}: table {table.key} is declared already")
    for flow in pipeline.flows:
        if flow.name in flows:
            raise ValueError(f"pipeline {pipeline.name!r}: flow {flow.name} is declared already")
    settings = {s.name for p in _REGISTERED.values() for s in p.settings}
    for setting in pipeline.settings:
        if setting.name in settings:
            raise ValueError(
                f"pipeline {pipeline.name!r}: setting {setting.name} is declared already"
            )
    _REGISTERED[pipeline.name] = pipeline
    return pipeline


def _discover() -> None:
    global _discovered
    if not _discovered:
        _discovered = True
        for module in pkgutil.iter_modules(__path__):
            _note_module(importlib.import_module(f"{__name__}.{module.name}"))
        for name in os.environ.get(EXTRA_PIPELINES_VARIABLE, "").split(","):
            if name.strip():
                _note_module(importlib.import_module(name.strip()))


def _note_module(module: ModuleType) -> None:
    """Remember the pipelines ``module`` declares as discovered, and, for a package, its folder
    for each (a pipeline declared in a module of its own has no folder of its own)."""
    declared = [v for v in vars(module).values() if isinstance(v, Pipeline)]
    _DISCOVERED.update(p.name for p in declared)
    if not getattr(module, "__path__", None) or not getattr(module, "__file__", None):
        return
    for pipeline in declared:
        _FOLDERS.setdefault(pipeline.name, Path(module.__file__).resolve().parent)


def pipeline_folder(name: str) -> Path | None:
    """The folder of the package that declares the pipeline ``name``, which also holds its
    bundle files (its jobs, its dashboard); None for a pipeline declared elsewhere (a test's).

    >>> pipeline_folder("iot").name
    'iot'
    """
    _discover()
    return _FOLDERS.get(name)


def unregister(name: str) -> None:
    """Forget the pipeline ``name`` (a notebook's or a test's own), if it is registered."""
    _REGISTERED.pop(name, None)


@contextmanager
def registered(pipeline: Pipeline) -> Iterator[Pipeline]:
    """``pipeline`` registered for the block only (a test's or a notebook's trial), forgotten
    after it, whatever the block raises.

    The registry is the process's, not a context variable's: a stream calls its batches on
    Py4J's callback threads, which do not inherit the caller's context, and a batch looks up
    declarations (a table's schema: streams/table_schema.py).
    """
    _discover()
    register(pipeline)
    try:
        yield pipeline
    finally:
        if pipeline.name not in _DISCOVERED:  # a discovered pipeline is the process's: it stays
            unregister(pipeline.name)


def pipelines(names: Sequence[str] = ()) -> list[Pipeline]:
    """The registered pipelines named (all of them when ``names`` is empty), by name;
    :class:`KeyError` names the known ones when a name is unknown."""
    _discover()
    known = sorted(_REGISTERED)
    unknown = [n for n in names if n not in _REGISTERED]
    if unknown:
        raise KeyError(
            f"unknown pipeline {', '.join(map(repr, unknown))}; known: {', '.join(known)}"
        )
    return [_REGISTERED[n] for n in known if not names or n in names]


def owners(flows: Sequence[Flow]) -> tuple[str, ...]:
    """The names of the pipelines that declare ``flows`` (a flow no pipeline declares has none)."""
    names = {f.name for f in flows}
    return tuple(p.name for p in pipelines() if names & {f.name for f in p.flows})


def generate_input(
    landing: str, names: Sequence[str] = (), **options: object
) -> dict[str, list[str]]:
    """Synthetic input of the pipelines named (default: every one with a generator) in
    ``landing``: each generator's ``options`` (records, files, seed, faults, customers...).
    Returns the paths written, by dataset."""
    written: dict[str, list[str]] = {}
    for pipeline in pipelines(names):
        if pipeline.generate is None:
            if names:
                raise KeyError(f"pipeline {pipeline.name!r} has no generator")
            continue
        written.update(pipeline.generate(landing, **options))
    return written


def all_tables() -> dict[str, Table]:
    """Every declared table by key, each pipeline's in its declared order (upstream first)."""
    return {t.key: t for p in pipelines() for t in p.tables}


def all_flows() -> tuple[Flow, ...]:
    """Every declared flow, each pipeline's in its declared order (upstream first)."""
    return tuple(f for p in pipelines() for f in p.flows)


def all_datasets() -> list[str]:
    """The input datasets of every declared pipeline (``landing/<dataset>``), sorted."""
    return landing_datasets(all_flows())


def declared_table(key: str) -> Table:
    """The declaration of the table ``key``; :class:`KeyError` names the known ones."""
    tables = all_tables()
    try:
        return tables[key]
    except KeyError:
        raise KeyError(f"unknown table {key!r}; known tables: {', '.join(tables)}") from None


def _declared(kind: str, known_as: str, declared: dict[str, T], name: str) -> T:
    try:
        return declared[name]
    except KeyError:
        known = ", ".join(sorted(declared)) or "none"
        raise KeyError(f"unknown {kind} {name!r}; {known_as}: {known}") from None


def declared_contract(dataset: str) -> Contract:
    """The contract of the input dataset ``dataset``; :class:`KeyError` names the known ones."""
    contracts = {c.dataset: c for p in pipelines() for c in p.contracts}
    return _declared("dataset", "datasets with a contract", contracts, dataset)


def declared_setting(name: str) -> AnySetting:
    """The declaration of the setting ``name``; :class:`KeyError` names the known ones."""
    settings = {s.name: s for p in pipelines() for s in p.settings}
    return _declared("setting", "known settings", settings, name)

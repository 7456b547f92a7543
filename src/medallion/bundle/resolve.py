"""The bundle's jobs, as the Databricks CLI reads them: ``databricks.yml`` and the files it
includes, with ``${var.x}`` (and ``${bundle.*}``, ``${workspace.current_user.*}``,
``${workspace.file_path}``) resolved for a target.

The ``local`` target of ``databricks.yml`` holds the laptop's values (paths instead of Unity
Catalog names); it is what ``medallion job run`` uses unless told otherwise.
"""

from __future__ import annotations

import copy
import getpass
import glob
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from medallion.bundle.python_resources import python_jobs
from medallion.errors import ConfigError

BUNDLE_FILE = "databricks.yml"
LOCAL_TARGET = "local"
TRIGGER_PARAMETER = "trigger"
_REFERENCE = re.compile(r"\$\{([A-Za-z0-9_.\[\]-]+)\}")
# Lists that a target's override merges item by item (by this key) instead of replacing.
_MERGE_KEYS = {
    "tasks": "task_key",
    "job_clusters": "job_cluster_key",
    "environments": "environment_key",
    "parameters": "name",
}


class BundleError(ConfigError):
    """The bundle's YAML is unusable: the message says which file, job or variable."""


@dataclass(frozen=True)
class Task:
    """One task of a job, with its paths resolved against the YAML file that names them."""

    key: str
    depends_on: tuple[str, ...]
    notebook: Path | None
    base_parameters: dict[str, str]
    job_cluster_key: str | None
    spec: dict
    # A Python wheel task's entry point (``medallion-task``); its named parameters are
    # ``base_parameters``, under the job's parameters as for a notebook.
    entry_point: str | None = None

    @property
    def kind(self) -> str:
        """The task's type: ``notebook_task``, ``python_wheel_task``, ..."""
        return next((k for k in self.spec if k.endswith("_task")), "unknown")


@dataclass(frozen=True)
class Job:
    """One job of the bundle, resolved for a target."""

    key: str
    name: str
    tasks: tuple[Task, ...]
    parameters: dict[str, str]
    continuous: bool
    source: Path
    spec: dict = field(repr=False)

    def task(self, key: str) -> Task:
        """The task with this key."""
        for task in self.tasks:
            if task.key == key:
                return task
        raise BundleError(f"job {self.key} has no task {key!r}")

    def task_order(self) -> list[Task]:
        """The tasks, each after all it depends on (declaration order among equals)."""
        keys = {t.key for t in self.tasks}
        for task in self.tasks:
            for upstream in task.depends_on:
                if upstream not in keys:
                    raise BundleError(
                        f"job {self.key}: task {task.key} depends on unknown task {upstream!r}"
                    )
        done: list[Task] = []
        remaining = list(self.tasks)
        while remaining:
            ready = [t for t in remaining if set(t.depends_on) <= {d.key for d in done}]
            if not ready:
                cycle = ", ".join(t.key for t in remaining)
                raise BundleError(f"job {self.key}: tasks {cycle} depend on each other in a cycle")
            done.append(ready[0])
            remaining.remove(ready[0])
        return done


def find_bundle_root(start: str | Path | None = None) -> Path:
    """The folder holding ``databricks.yml``: ``MEDALLION_BUNDLE_ROOT``, else the nearest one
    above ``start`` (the working directory), else the source tree this package runs from."""
    explicit = os.environ.get("MEDALLION_BUNDLE_ROOT")
    if explicit:
        return Path(explicit).resolve()
    here = Path(start or os.getcwd()).resolve()
    for folder in (here, *here.parents, *Path(__file__).resolve().parents):
        if (folder / BUNDLE_FILE).is_file():
            return folder
    raise BundleError(f"no {BUNDLE_FILE} found above {here}; set MEDALLION_BUNDLE_ROOT")


def _read_yaml(path: Path) -> dict:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as error:
        raise BundleError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(data, dict):
        raise BundleError(f"{path}: the top level must be a mapping")
    return data


def _merge(base: object, override: object) -> object:
    """``override`` laid over ``base``: mappings deeply, keyed lists item by item."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            if key in _MERGE_KEYS and isinstance(value, list) and isinstance(base.get(key), list):
                merged[key] = _merge_list(base[key], value, _MERGE_KEYS[key])
            else:
                merged[key] = _merge(base.get(key), value) if key in base else value
        return merged
    return copy.deepcopy(override)


def _merge_list(base: list, override: list, key: str) -> list:
    merged = [copy.deepcopy(item) for item in base]
    for item in override:
        index = next((i for i, b in enumerate(merged) if b.get(key) == item.get(key)), None)
        if index is None:
            merged.append(copy.deepcopy(item))
        else:
            merged[index] = _merge(merged[index], item)
    return merged


class Bundle:
    """``databricks.yml`` and the files it includes, as the Databricks CLI reads them."""

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root).resolve() if root else find_bundle_root()
        self.main_file = self.root / BUNDLE_FILE
        if not self.main_file.is_file():
            raise BundleError(f"{self.main_file} does not exist")
        self.config = _read_yaml(self.main_file)
        self.files: dict[Path, dict] = {self.main_file: self.config}
        # Which file defines each job: its relative paths are relative to that file.
        self.job_sources: dict[str, Path] = {}
        self.jobs_spec: dict[str, dict] = {}
        self._collect_jobs(self.main_file, self.config)
        for pattern in self.config.get("include") or []:
            for name in sorted(glob.glob(str(self.root / pattern))):
                path = Path(name).resolve()
                data = _read_yaml(path)
                self.files[path] = data
                self._collect_jobs(path, data)
        # The jobs of databricks.yml's `python` section (each pipeline's), their paths relative
        # to the bundle root.
        python = python_jobs(self.config, LOCAL_TARGET)
        self.python_job_keys = tuple(python)
        self._collect_jobs(self.main_file, {"resources": {"jobs": python}})

    def _collect_jobs(self, path: Path, data: dict) -> None:
        for key, spec in ((data.get("resources") or {}).get("jobs") or {}).items():
            if key in self.jobs_spec:
                raise BundleError(
                    f"job {key} is defined in both {self.job_sources[key]} and {path}"
                )
            self.jobs_spec[key] = spec or {}
            self.job_sources[key] = path

    @property
    def name(self) -> str:
        return str((self.config.get("bundle") or {}).get("name", ""))

    @property
    def targets(self) -> dict[str, dict]:
        return {k: v or {} for k, v in (self.config.get("targets") or {}).items()}

    def declared_variables(self) -> dict[str, dict]:
        """The variables ``databricks.yml`` and the files it includes declare, by name (a
        pipeline's folder may declare the variables of its own settings)."""
        declared: dict[str, dict] = {}
        for path, data in self.files.items():
            for name, spec in (data.get("variables") or {}).items():
                if name in declared:
                    raise BundleError(f"variable {name} is declared twice (again in {path.name})")
                declared[name] = spec or {}
        return declared

    def target(self, name: str) -> dict:
        """The settings of one target; a clear error for an unknown one."""
        if name not in self.targets:
            known = ", ".join(self.targets) or "none"
            raise BundleError(f"unknown target {name!r}; targets: {known}")
        return self.targets[name]

    def variable_values(
        self, target: str, overrides: Mapping[str, str] | None = None
    ) -> dict[str, object]:
        """Each variable's value for ``target``, before references are resolved.

        Precedence, as with the CLI: ``overrides`` (``--var``), then ``BUNDLE_VAR_<name>``,
        then the target's value, then the default. A lookup cannot be resolved offline and
        leaves the value unset.
        """
        declared = self.declared_variables()
        values: dict[str, object] = {k: v.get("default") for k, v in declared.items()}
        for name, value in (self.target(target).get("variables") or {}).items():
            if name not in declared:
                raise BundleError(f"target {target} sets undeclared variable {name!r}")
            if isinstance(value, dict) and ("default" in value or "lookup" in value):
                value = value.get("default")
            values[name] = value
        for name in declared:
            if f"BUNDLE_VAR_{name}" in os.environ:
                values[name] = os.environ[f"BUNDLE_VAR_{name}"]
        for name, value in (overrides or {}).items():
            if name not in declared:
                raise BundleError(f"unknown variable {name!r}; declared: {', '.join(declared)}")
            values[name] = value
        return values

    def resolver(
        self,
        target: str,
        overrides: Mapping[str, str] | None = None,
        user_name: str | None = None,
    ) -> Callable[[object, str], object]:
        """A function that substitutes ``${...}`` references in a value for ``target``."""
        raw = self.variable_values(target, overrides)
        user_name = user_name or getpass.getuser()
        known = {
            "bundle.name": self.name,
            "bundle.target": target,
            "workspace.current_user.userName": user_name,
            "workspace.current_user.short_name": short_name(user_name),
            "workspace.file_path": str(self.root),
        }
        resolved: dict[str, object] = {}

        declared = self.declared_variables()

        def complex_variable(name: str) -> bool:
            return (declared.get(name) or {}).get("type") == "complex"

        def variable(name: str, where: str, stack: tuple[str, ...]) -> object:
            if name not in raw:
                raise BundleError(f"{where}: ${{var.{name}}} is not declared under variables")
            if stack and complex_variable(stack[-1]) and complex_variable(name):
                # As the Databricks CLI refuses it.
                raise BundleError(
                    f"{where}: complex variables cannot contain references to another complex "
                    f"variable (${{var.{name}}})"
                )
            if name in stack:
                raise BundleError(f"variables refer to each other in a cycle: {' -> '.join(stack)}")
            if name not in resolved:
                if raw[name] is None:
                    raise BundleError(
                        f"{where}: variable {name} has no value for target {target} "
                        f"(give it one with --var {name}=... or BUNDLE_VAR_{name})"
                    )
                resolved[name] = substitute(raw[name], f"variable {name}", (*stack, name))
            return resolved[name]

        def lookup(reference: str, where: str, stack: tuple[str, ...]) -> object | None:
            if reference.startswith("var."):
                return variable(reference[4:], where, stack)
            return known.get(reference)

        def substitute(value: object, where: str, stack: tuple[str, ...] = ()) -> object:
            if isinstance(value, dict):
                return {k: substitute(v, f"{where}.{k}", stack) for k, v in value.items()}
            if isinstance(value, list):
                return [substitute(v, f"{where}[{i}]", stack) for i, v in enumerate(value)]
            if not isinstance(value, str):
                return value
            whole = _REFERENCE.fullmatch(value)
            if whole:
                found = lookup(whole.group(1), where, stack)
                return value if found is None else found

            def one(match: re.Match) -> str:
                found = lookup(match.group(1), where, stack)
                return match.group(0) if found is None else str(found)

            return _REFERENCE.sub(one, value)

        return lambda value, where: substitute(value, where)

    def job_specs(self, target: str) -> dict[str, dict]:
        """Each job's raw settings with the target's overrides merged in (unresolved)."""
        overrides = (self.target(target).get("resources") or {}).get("jobs") or {}
        specs = {key: copy.deepcopy(spec) for key, spec in self.jobs_spec.items()}
        for key, spec in overrides.items():
            specs[key] = _merge(specs.get(key, {}), spec or {})
        return specs

    def jobs(
        self,
        target: str = LOCAL_TARGET,
        overrides: Mapping[str, str] | None = None,
        user_name: str | None = None,
    ) -> dict[str, Job]:
        """Every job, resolved for ``target``, by key."""
        resolve = self.resolver(target, overrides, user_name)
        jobs = {}
        for key, raw in self.job_specs(target).items():
            spec = resolve(raw, f"jobs.{key}")
            source = self.job_sources.get(key, self.main_file)
            jobs[key] = _job(key, spec, source)
        return jobs

    def job(
        self,
        key: str,
        target: str = LOCAL_TARGET,
        overrides: Mapping[str, str] | None = None,
        user_name: str | None = None,
    ) -> Job:
        """One job, resolved for ``target``; a clear error naming the known jobs."""
        jobs = self.jobs(target, overrides, user_name)
        if key not in jobs:
            raise BundleError(f"unknown job {key!r}; jobs: {', '.join(jobs) or 'none'}")
        return jobs[key]

    def deployed_name(self, job: Job, target: str, user_name: str) -> str:
        """The job's name in the workspace: development mode prefixes ``[dev <short name>]``."""
        settings = self.target(target)
        prefix = (settings.get("presets") or {}).get("name_prefix")
        if prefix is None and settings.get("mode") == "development":
            prefix = f"[dev {short_name(user_name)}] "
        return f"{prefix or ''}{job.name}"


def short_name(user_name: str) -> str:
    """The CLI's short name of a user: the part before ``@``, lowercase, ``_`` for the rest.

    >>> short_name("Jane.Doe@example.com")
    'jane_doe'
    """
    return re.sub(r"[^a-z0-9_]", "_", user_name.split("@", 1)[0].lower())


def _job(key: str, spec: dict, source: Path) -> Job:
    tasks = []
    for raw in spec.get("tasks") or []:
        notebook_task = raw.get("notebook_task") or {}
        wheel_task = raw.get("python_wheel_task") or {}
        notebook = notebook_task.get("notebook_path")
        parameters = notebook_task.get("base_parameters") or wheel_task.get("named_parameters")
        tasks.append(
            Task(
                key=str(raw.get("task_key")),
                depends_on=tuple(str(d.get("task_key")) for d in raw.get("depends_on") or []),
                notebook=(source.parent / notebook).resolve() if notebook else None,
                base_parameters={
                    str(k): "" if v is None else str(v) for k, v in (parameters or {}).items()
                },
                job_cluster_key=raw.get("job_cluster_key"),
                spec=raw,
                entry_point=wheel_task.get("entry_point"),
            )
        )
    parameters = {
        str(p["name"]): "" if p.get("default") is None else str(p.get("default"))
        for p in spec.get("parameters") or []
    }
    return Job(
        key=key,
        name=str(spec.get("name") or key),
        tasks=tuple(tasks),
        parameters=parameters,
        continuous="continuous" in spec,
        source=source,
        spec=spec,
    )


def task_parameters(job: Job, task: Task, params: Mapping[str, str]) -> dict[str, str]:
    """A task's parameters: its base parameters, with the job parameters over them (as on
    Databricks, where a job parameter overrides a task parameter of the same name)."""
    return {**task.base_parameters, **job.parameters, **params}

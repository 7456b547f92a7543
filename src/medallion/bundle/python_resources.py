"""The bundle's resources defined in Python (``databricks-bundles``): each pipeline's jobs.

``databricks.yml``'s ``python`` section names :func:`load_resources`; the Databricks CLI calls
it (in ``python.venv_path``'s interpreter) on every validate, deploy and run, and adds the jobs
it returns to those of the YAML files. The local tooling (medallion/bundle/resolve.py) calls
the same functions the section names, so ``medallion job list`` and ``job run`` see exactly
the jobs a deploy creates.
"""

from __future__ import annotations

import importlib

from medallion.errors import ConfigError


def load_resources(bundle) -> object:
    """Every pipeline's jobs (medallion/pipeline_jobs.py), as ``databricks-bundles`` resources."""
    # deferred: databricks-bundles is needed by the bundle's tooling only, never by a job's run
    from databricks.bundles.core import Resources

    # deferred: as above
    from databricks.bundles.jobs import Job

    # deferred: the declarations import every pipeline, which reading a YAML-only bundle needs not
    from medallion.pipeline_jobs import job_specs

    resources = Resources()
    for key, spec in job_specs().items():
        resources.add_job(key, Job.from_dict(spec))
    return resources


def python_jobs(config: dict, target: str) -> dict[str, dict]:
    """The jobs the functions of ``config``'s ``python.resources`` return, by key, as the
    dictionaries bundle YAML would hold (paths relative to the bundle root)."""
    names = (config.get("python") or {}).get("resources") or []
    if not names:
        return {}
    try:
        # deferred: only a bundle with Python resources needs databricks-bundles
        from databricks.bundles.core import Bundle
    except ImportError:
        raise ConfigError(
            "the bundle defines jobs in Python: pip install databricks-bundles "
            '(pip install -e ".[databricks]")'
        ) from None
    jobs: dict[str, dict] = {}
    for name in names:
        module, _, function = str(name).partition(":")
        load = getattr(importlib.import_module(module), function)
        for key, job in load(Bundle(target=target)).jobs.items():
            if key in jobs:
                raise ConfigError(f"job {key} is defined twice in Python ({name})")
            jobs[key] = job.as_dict()
    return jobs

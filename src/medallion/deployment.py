"""A deployment: a :class:`~medallion.config.Config` read against the declared pipelines.

Config is a plain value of where things live and how streams run. What it means for the
pipelines is looked up here, in the registry: the pipelines, tables and flows it covers, the
values its settings give, and whether its settings and carried columns name what the pipelines
declare (:func:`checked`, at every door a Config comes in by: the CLI, a job's parameters).
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import TypeVar

from medallion.config import Config
from medallion.declarations import Flow, Pipeline, Table
from medallion.errors import ConfigError
from medallion.expectations import expectation_setting, expectations_of
from medallion.pipeline_settings import AnySetting, ChoiceSetting, ColumnsSetting, Setting
from medallion.pipelines import declared_contract, declared_setting, declared_table, pipelines
from medallion.sql_names import TableRef

_Kind = TypeVar("_Kind", Setting, ColumnsSetting, ChoiceSetting)


def pipelines_of(config: Config) -> list[Pipeline]:
    """The pipelines ``config`` covers (every registered one when it names none);
    :class:`ConfigError` for an unknown name."""
    try:
        return pipelines(config.pipelines)
    except KeyError as error:
        raise ConfigError(str(error.args[0])) from None


def tables_of(config: Config) -> list[TableRef]:
    """The tables of the pipelines ``config`` covers, each pipeline's upstream first."""
    return [config.table(t.key) for p in pipelines_of(config) for t in p.tables]


def flows_of(config: Config) -> tuple[Flow, ...]:
    """The flows of the pipelines ``config`` covers, each pipeline's upstream first."""
    return tuple(f for p in pipelines_of(config) for f in p.flows)


def table_of(key: str) -> Table:
    """The declaration of the table ``key``; :class:`ConfigError` names the known ones."""
    try:
        return declared_table(key)
    except KeyError as error:
        raise ConfigError(str(error.args[0])) from None


def _declared_setting(name: str) -> AnySetting:
    try:
        return declared_setting(name)
    except KeyError as error:
        raise ConfigError(str(error.args[0])) from None


def _declared_kind(name: str, kind: type[_Kind], what: str) -> _Kind:
    declared = _declared_setting(name)
    if not isinstance(declared, kind):
        raise TypeError(f"setting {name} is not {what}")
    return declared


def setting(config: Config, name: str) -> Decimal:
    """The value of a pipeline's number setting: the one ``config`` gives, else its default."""
    declared = _declared_kind(name, Setting, "a number")
    given = config.settings.get(name)
    return declared.default if given is None else declared.parse(given)


def columns_setting(config: Config, name: str) -> tuple[str, ...]:
    """The columns a pipeline's column setting chooses: those given, else every one."""
    declared = _declared_kind(name, ColumnsSetting, "a choice of columns")
    return declared.parse(config.settings.get(name, ""))


def choice_setting(config: Config, name: str) -> str:
    """The choice a pipeline's choice setting makes: the one given, else its default."""
    declared = _declared_kind(name, ChoiceSetting, "a choice")
    given = config.settings.get(name)
    return declared.default if given is None else declared.parse(given)


def checked(config: Config) -> Config:
    """``config``, once its settings and carried columns are found to name what the pipelines
    declare, with values they take; :class:`ConfigError` says what is wrong."""
    for name, value in config.settings.items():
        target = expectation_setting(name)
        if target is None:
            _declared_setting(name).parse(value)
            continue
        try:
            contract = declared_contract(target[0])
        except KeyError as error:
            raise ConfigError(str(error.args[0])) from None
        expectations_of(contract, {name: value})
    for key, names in config.carried_columns.items():
        _check_carried(key, names)
    return config


def _check_carried(key: str, names: Sequence[str]) -> None:
    """The fields carried into ``key``: none twice, none a column the table declares or a
    metadata column, and the table one that takes them."""
    table = table_of(key)
    if not table.carries_input_fields:
        raise ConfigError(f"table {key} takes no carried columns")
    declared = {c.lower() for c in table.columns}
    seen: set[str] = set()
    for name in names:
        lowered = name.lower()  # as Spark resolves
        if lowered in seen:
            raise ConfigError(f"carried column {name!r} is given twice")
        if lowered in declared or lowered.startswith("_"):
            raise ConfigError(f"carried column {name!r} is a column of {key} already")
        seen.add(lowered)

"""The arguments that several ``medallion`` commands share, each defined once: where the lake
and the landing folder are, the pipelines acted on, the settings a deployment gives them, and
``--output``; and the Config they make."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence

from medallion.config import Config
from medallion.deployment import checked, pipelines_of
from medallion.errors import ConfigError
from medallion.pipelines import all_datasets, pipelines
from medallion.task_params import TOPIC_SUFFIX

LAKE_VARIABLE = "MEDALLION_LAKE"
LANDING_VARIABLE = "MEDALLION_LANDING"


def add_lake_argument(
    parser: argparse.ArgumentParser, help: str = "folder of the Delta tables and checkpoints"
) -> None:
    """``--lake DIR``: required unless ``$MEDALLION_LAKE`` gives it."""
    default = os.environ.get(LAKE_VARIABLE) or None
    parser.add_argument(
        "--lake",
        required=default is None,
        default=default,
        metavar="DIR",
        help=f"{help} (${LAKE_VARIABLE})",
    )


def add_landing_argument(
    parser: argparse.ArgumentParser,
    required: bool = False,
    help: str = "folder where input files land",
) -> None:
    """``--landing DIR``, from ``$MEDALLION_LANDING`` when not given."""
    default = os.environ.get(LANDING_VARIABLE) or None
    parser.add_argument(
        "--landing",
        required=required and default is None,
        default=default,
        metavar="DIR",
        help=f"{help} (${LANDING_VARIABLE})",
    )


def add_output_argument(parser: argparse.ArgumentParser) -> None:
    """``--output text|json``: the same data for people or for programs (stdout)."""
    parser.add_argument(
        "--output",
        choices=("text", "json"),
        default="text",
        help="print for people, or the same data as JSON",
    )


def add_topic_arguments(group: argparse._ArgumentGroup, which: str = "") -> None:
    """``--events-topic``, ``--transactions-topic``, ...: the Kafka topic of each declared
    dataset (default: the dataset's name); ``which`` ends each flag's help."""
    for dataset in all_datasets():
        group.add_argument(
            f"--{dataset.replace('_', '-')}-topic",
            dest=f"{dataset}{TOPIC_SUFFIX}",
            default=dataset,
            metavar="TOPIC",
            help=f"topic of the {dataset.replace('_', ' ')}{which}",
        )


def print_json(data: object) -> None:
    """``data`` as indented JSON on stdout (dates and decimals as text)."""
    print(json.dumps(data, indent=2, default=str))


def add_pipeline_argument(parser: argparse.ArgumentParser, default: str = "all") -> None:
    """``--pipeline NAME`` (repeatable): the pipelines a command acts on."""
    parser.add_argument(
        "--pipeline",
        action="append",
        default=[],
        metavar="NAME",
        help=f"act on this pipeline only (repeatable; default: {default}; `medallion "
        "pipelines` lists them)",
    )


def add_settings_arguments(parser: argparse.ArgumentParser) -> None:
    """``--set NAME=VALUE`` and ``--carry-column [TABLE:]NAME`` (repeatable): what a deployment
    gives its pipelines, for ``run`` and for the commands that write as its streams do."""
    parser.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a pipeline setting, such as a rule's threshold or an expectation's action "
        "(repeatable; `medallion pipelines` lists them)",
    )
    parser.add_argument(
        "--carry-column",
        action="append",
        default=[],
        metavar="[TABLE:]NAME",
        help="carry this input field into a table as a STRING column, for example "
        "silver/events:coupon; the table may be left out when one table of the pipelines run "
        "takes carried columns (repeatable; docs/operations.md)",
    )


def carried_columns(
    arguments: Sequence[str], pipeline_names: Sequence[str]
) -> dict[str, list[str]]:
    """The fields ``--carry-column [TABLE:]NAME`` carries, by table key; without a table, into
    the one table of the pipelines run that takes carried columns."""
    carried: dict[str, list[str]] = {}
    for argument in arguments:
        key, _, name = argument.rpartition(":")
        if not key:
            try:
                chosen = pipelines(pipeline_names)
            except KeyError as error:
                raise ConfigError(str(error.args[0])) from None
            takers = [t.key for p in chosen for t in p.tables if t.carries_input_fields]
            if len(takers) != 1:
                raise ConfigError(
                    f"--carry-column {argument}: name the table, TABLE:NAME "
                    f"(tables that take carried columns: {', '.join(takers) or 'none'})"
                )
            key = takers[0]
        carried.setdefault(key, []).append(name)
    return carried


def lake_config(args: argparse.Namespace, **changes: object) -> Config:
    """The Config of a command's ``--lake`` (and ``--landing``, ``--pipeline``), for a lake that
    exists; :class:`ConfigError` before Spark starts for a missing lake or an unknown pipeline."""
    lake = os.path.abspath(args.lake)
    landing = os.path.abspath(getattr(args, "landing", None) or lake)
    names = tuple(getattr(args, "pipeline", None) or ())
    config = Config(landing=landing, lake=lake, pipelines=names, **changes)  # type: ignore[arg-type]
    checked(config)
    pipelines_of(config)
    if not os.path.isdir(config.lake):
        raise ConfigError(f"no lake at {config.lake}")
    return config

"""The settings a pipeline declares, which its flows read from the configuration:
``medallion run --set NAME=VALUE`` locally, the ``settings`` job parameter on Databricks."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from medallion.errors import ConfigError
from medallion.sql_names import validate_identifier


@dataclass(frozen=True)
class Setting:
    """A number a pipeline's flows read from the configuration, such as a rule's threshold:
    ``medallion run --set NAME=VALUE`` locally, the ``settings`` job parameter on Databricks."""

    name: str
    default: Decimal
    help: str
    minimum: Decimal = Decimal(0)

    def __post_init__(self) -> None:
        validate_identifier(self.name, "setting name")

    def parse(self, text: str) -> Decimal:
        """The value ``text`` gives; :class:`ConfigError` unless a number >= the minimum."""
        try:
            value = Decimal(text.strip())
        except InvalidOperation:
            raise ConfigError(f"setting {self.name} must be a number, not {text!r}") from None
        if not value.is_finite() or value < self.minimum:
            raise ConfigError(f"setting {self.name} must be a number >= {self.minimum}: {text!r}")
        return value


@dataclass(frozen=True)
class ColumnsSetting:
    """A choice of some of a table's ``columns`` that a pipeline's flows read from the
    configuration, such as the columns whose change opens a new version of a history:
    ``--set NAME=country+segment`` (``+`` between names, as ``,`` separates settings in the
    ``settings`` job parameter). The default, and an empty value: every column."""

    name: str
    columns: tuple[str, ...]
    help: str

    def __post_init__(self) -> None:
        validate_identifier(self.name, "setting name")

    @property
    def default(self) -> str:
        return "+".join(self.columns)

    def parse(self, text: str) -> tuple[str, ...]:
        """The columns ``text`` names, in declared order; :class:`ConfigError` for a name that
        is not one of them."""
        names = [n.strip() for n in text.replace(" ", "+").split("+") if n.strip()]
        unknown = [n for n in names if n not in self.columns]
        if unknown:
            raise ConfigError(
                f"setting {self.name} names no column {', '.join(map(repr, unknown))}: "
                f"choose among {', '.join(self.columns)}, joined by +"
            )
        return tuple(c for c in self.columns if c in names) if names else self.columns


@dataclass(frozen=True)
class ChoiceSetting:
    """One of a few named meanings a pipeline's flows read from the configuration, such as how
    gold attributes a purchase to a country: ``--set NAME=CHOICE``. The first choice is the
    default."""

    name: str
    choices: tuple[str, ...]
    help: str

    def __post_init__(self) -> None:
        validate_identifier(self.name, "setting name")
        if not self.choices:
            raise ValueError(f"setting {self.name} offers no choice")

    @property
    def default(self) -> str:
        return self.choices[0]

    def parse(self, text: str) -> str:
        """The choice ``text`` names; :class:`ConfigError` for any other text."""
        choice = text.strip()
        if choice not in self.choices:
            raise ConfigError(
                f"setting {self.name} is one of {', '.join(self.choices)}, not {text!r}"
            )
        return choice


# Any kind of pipeline setting.
AnySetting = Setting | ColumnsSetting | ChoiceSetting

"""Expectations: every rule of an input contract, named, with what happens to a record that
breaks it (docs/governance.md, "Expectations").

- ``quarantine`` (the default): the record goes to the quarantine with the rule's message;
- ``warn``: the record passes into silver and the failure is counted in the data-quality log;
- ``fail``: the record is quarantined, but when more than the rule's threshold of a batch's
  rows break it (default 0: any row), the stream stops before the batch writes anything.

A contract (medallion/contract_rules.py) is its fields' rules (medallion/contracts.py), the rules every
line is checked against first (is it UTF-8, JSON, one object), and the dataset's own. Rules are
named ``<field>_<check>`` (``event_type_allowed``, ``revenue_not_negative``) or by the
dataset (``purchase_has_revenue``). A rule whose failure would leave silver without a usable
value (a required field missing or mistyped, a change's operation) cannot be set to ``warn``.

Actions are pipeline settings: ``--set expect.events.revenue_not_negative=warn``, or
``fail:0.05`` to stop when more than 5% of a batch's rows break it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING

from medallion.errors import ConfigError
from medallion.sql_names import validate_identifier

if TYPE_CHECKING:
    from medallion.contract_rules import Contract

QUARANTINE, WARN, FAIL = "quarantine", "warn", "fail"
ACTIONS = (QUARANTINE, WARN, FAIL)
SETTING_PREFIX = "expect."
# The column of a validated batch that lists the rules each row broke (empty when none).
FAILED_RULES = "_failed_rules"


@dataclass(frozen=True)
class Expectations:
    """What each rule of one dataset's contract does to a record that breaks it: ``warned``
    rules let it pass, ``failing`` ones (rule, most failing rows allowed as a fraction of a
    batch) stop the stream beyond their threshold; every other rule quarantines."""

    dataset: str
    warned: frozenset[str] = frozenset()
    failing: tuple[tuple[str, Decimal], ...] = ()

    def action(self, rule: str) -> str:
        if rule in self.warned:
            return WARN
        return FAIL if rule in dict(self.failing) else QUARANTINE


def parse_action(text: str) -> tuple[str, Decimal]:
    """An action as a setting gives it: ``quarantine``, ``warn``, ``fail`` or ``fail:RATE``
    (the fraction of a batch's rows allowed to break the rule, 0 to 1).

    >>> parse_action("fail:0.05")
    ('fail', Decimal('0.05'))
    """
    action, _, rate = text.strip().partition(":")
    if action not in ACTIONS or (rate and action != FAIL):
        raise ConfigError(
            f"an expectation's action is quarantine, warn, fail or fail:RATE, not {text!r}"
        )
    try:
        threshold = Decimal(rate or "0")
    except InvalidOperation:
        threshold = Decimal(-1)
    if not threshold.is_finite() or not 0 <= threshold < 1:
        raise ConfigError(f"a fail threshold is a fraction from 0 to below 1, not {rate!r}")
    return action, threshold


def expectation_setting(name: str) -> tuple[str, str] | None:
    """``(dataset, rule)`` of a setting named ``expect.<dataset>.<rule>``; None for another."""
    if not name.startswith(SETTING_PREFIX):
        return None
    dataset, dot, rule = name[len(SETTING_PREFIX) :].partition(".")
    if not dot:
        raise ConfigError(f"an expectation setting is expect.<dataset>.<rule>, not {name!r}")
    return validate_identifier(dataset, "dataset"), validate_identifier(rule, "rule name")


def expectations_of(contract: Contract, settings: Mapping[str, str]) -> Expectations:
    """The actions ``settings`` give the rules of ``contract``; :class:`ConfigError` for an
    unknown rule, an unknown action, or ``warn`` on a rule that cannot pass with a warning."""
    warned: set[str] = set()
    failing: list[tuple[str, Decimal]] = []
    for name, value in settings.items():
        target = expectation_setting(name)
        if target is None or target[0] != contract.dataset:
            continue
        rule = target[1]
        if rule not in contract.rule_names:
            raise ConfigError(
                f"{contract.dataset} has no rule {rule!r}; its rules: "
                + ", ".join(contract.rule_names)
            )
        action, threshold = parse_action(value)
        if action == WARN and rule not in contract.warnable:
            raise ConfigError(
                f"rule {contract.dataset}.{rule} cannot be set to warn: a record that breaks it "
                "has no usable value for silver (use quarantine or fail)"
            )
        if action == WARN:
            warned.add(rule)
        elif action == FAIL:
            failing.append((rule, threshold))
    return Expectations(contract.dataset, frozenset(warned), tuple(sorted(failing)))

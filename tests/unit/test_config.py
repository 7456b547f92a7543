"""The configuration object: paths, names, identifiers and Delta source options."""

from __future__ import annotations

import pytest

from medallion.config import Config
from medallion.deployment import checked, choice_setting, setting, table_of
from medallion.errors import ConfigError
from medallion.source_options import DeltaSourceOptions
from medallion.sql_names import validate_identifier


def test_local_paths_and_registered_names():
    cfg = Config(landing="/l/", lake="/lake/")
    assert cfg.table("bronze/events").path == "/lake/bronze/events"
    assert (
        cfg.table("gold/hourly_product_metrics").qualified_name
        == "`medallion`.`gold_hourly_product_metrics`"
    )
    assert cfg.checkpoint("silver_events") == "/lake/_checkpoints/silver_events"
    assert cfg.landing_dir("events") == "/l/events"


def test_unity_catalog_names():
    cfg = Config(
        landing="/Volumes/main/m/landing", lake="/Volumes/main/m/lake", catalog="main", schema="m"
    )
    table = cfg.table("silver/events")
    assert table.path is None
    assert table.sql_name == "`main`.`m`.`silver_events`"


@pytest.mark.parametrize("bad", ["a b", "a;drop", "a`b", "x'y", "1abc", "", "a.b", "tab\t", "ünï"])
def test_identifiers_that_could_reach_sql_are_validated(bad):
    with pytest.raises(ConfigError):
        validate_identifier(bad)
    with pytest.raises(ConfigError):
        Config(landing="/l", lake="/k", schema=bad)


@pytest.mark.parametrize("bad", ["a`b", "", "  ", "group\nname", "x\x00"])
def test_a_readers_principal_that_could_break_out_of_its_quotes_is_refused(bad):
    with pytest.raises(ConfigError, match="invalid principal"):
        Config(landing="/l", lake="/k", catalog="main", readers=bad)
    ok = Config(landing="/l", lake="/k", catalog="main", readers="data-readers@example.com")
    assert ok.readers == "data-readers@example.com"


def test_unknown_table_is_a_clear_error():
    with pytest.raises(ConfigError, match="unknown table 'silver/nope'"):
        table_of("silver/nope")
    # Where a table lives needs no declaration; a key that names no layer is refused.
    assert Config(landing="/l", lake="/k").table("silver/nope").path == "/k/silver/nope"
    with pytest.raises(ConfigError, match="<layer>/<name>"):
        Config(landing="/l", lake="/k").table("platinum/events")


def test_delta_source_options():
    opts = DeltaSourceOptions(
        starting_version=3, max_files_per_trigger=1, with_event_time_order=True
    )
    assert opts.as_options() == {
        "startingVersion": "3",
        "maxFilesPerTrigger": "1",
        "skipChangeCommits": "true",
        "withEventTimeOrder": "true",
    }
    with pytest.raises(ConfigError):
        DeltaSourceOptions(starting_version=1, starting_timestamp="2026-01-01").as_options()


def test_a_choice_setting_defaults_to_its_first_choice_and_refuses_any_other():
    config = Config(landing="/l", lake="/k")
    assert choice_setting(config, "revenue_country") == "at_purchase"
    chosen = config.with_options(settings={"revenue_country": " at_processing "})
    assert choice_setting(chosen, "revenue_country") == "at_processing"
    with pytest.raises(ConfigError, match="revenue_country is one of at_purchase, at_processing"):
        checked(Config(landing="/l", lake="/k", settings={"revenue_country": "at_billing"}))
    with pytest.raises(TypeError, match="not a choice"):
        choice_setting(config, "fraud_risk_score_above")


def test_a_columns_setting_takes_some_of_its_columns_joined_by_plus_and_refuses_others():
    from medallion.pipeline_settings import ColumnsSetting

    tracked = ColumnsSetting("tracked", ("name", "email", "country"), "which columns")
    assert tracked.default == "name+email+country"
    assert tracked.parse("country+name") == ("name", "country")  # in declared order
    assert tracked.parse(" country name ") == ("name", "country")
    assert tracked.parse("") == ("name", "email", "country")  # empty: every column
    with pytest.raises(ConfigError, match="names no column 'colour': choose among name, email"):
        tracked.parse("country+colour")
    with pytest.raises(ConfigError, match="setting name"):
        ColumnsSetting("not a name", ("a",), "")
    # A number setting read as a number; asking a columns setting for one is a bug.
    config = Config(landing="/l", lake="/k", settings={"fraud_risk_score_above": "0.5"})
    assert str(setting(config, "fraud_risk_score_above")) == "0.5"
    with pytest.raises(ConfigError, match="fraud_new_account_days must be a number"):
        checked(Config(landing="/l", lake="/k", settings={"fraud_new_account_days": "soon"}))

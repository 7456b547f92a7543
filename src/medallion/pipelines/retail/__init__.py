"""Retail: a clickstream (events) and customer changes, bronze to gold."""

from __future__ import annotations

from medallion.declarations import Pipeline
from medallion.pipelines import register
from medallion.pipelines.retail.flows import FLOWS
from medallion.pipelines.retail.tables import TABLES

RETAIL = register(Pipeline("retail", TABLES, FLOWS))

"""The examples in the package's docstrings are true (those that need Spark are skipped)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import medallion

MODULES = sorted(
    m.name for m in pkgutil.walk_packages(medallion.__path__, "medallion.") if not m.ispkg
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    failed, _ = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert failed == 0

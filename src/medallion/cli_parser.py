"""The CLI's argument parser class: every subcommand shows its flags' defaults, and takes the
flags of the commands above it anywhere (``medallion run ... -v``, ``medallion job run X
--bundle DIR``), through argparse's documented ``parents`` and ``parser_class``."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Sequence
from typing import Any


class Help(argparse.RawDescriptionHelpFormatter):
    """Examples as written, and each flag's default after its help (when it has one)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if "%(default)" in text or default in (None, False, [], argparse.SUPPRESS):
            return text
        return f"{text} (default: %(default)s)"


def flags_anywhere(*flags: tuple[Sequence[str], dict[str, Any]]) -> argparse.ArgumentParser:
    """A parent parser of ``flags`` (names, ``add_argument`` options) for the subcommands
    below the one that defines them: without a default of their own there, so a value given
    above is kept."""
    parent = argparse.ArgumentParser(add_help=False)
    for names, options in flags:
        parent.add_argument(*names, **{**options, "default": argparse.SUPPRESS})
    return parent


class CommandParser(argparse.ArgumentParser):
    """A parser whose subcommands inherit ``inherited`` and the flags of ``anywhere``
    (:func:`flags_anywhere`), at every depth, with the :class:`Help` formatter."""

    def __init__(
        self,
        *args: Any,
        inherited: Sequence[argparse.ArgumentParser] = (),
        anywhere: Sequence[argparse.ArgumentParser] = (),
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("formatter_class", Help)
        kwargs["parents"] = [*inherited, *kwargs.get("parents", ())]
        super().__init__(*args, **kwargs)
        self._below = [*inherited, *anywhere]

    def add_subparsers(self, **kwargs: Any) -> Any:
        kwargs.setdefault("parser_class", functools.partial(CommandParser, inherited=self._below))
        return super().add_subparsers(**kwargs)

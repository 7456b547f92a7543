"""What reaches SQL: identifiers validated and quoted, string literals and paths escaped, paths
kept under their root, and where one table lives (:class:`TableRef`)."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from medallion.errors import ConfigError

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")


def validate_identifier(value: str, what: str = "identifier") -> str:
    """Return ``value`` if it is a plain SQL identifier, else raise :class:`ConfigError`.

    Only ``[A-Za-z_][A-Za-z0-9_]*`` is accepted, so quotes, backticks, semicolons, dots and
    whitespace can never reach SQL text.

    >>> validate_identifier("silver_events")
    'silver_events'
    """
    if not isinstance(value, str) or not _IDENTIFIER.fullmatch(value):
        raise ConfigError(
            f"invalid {what} {value!r}: use letters, digits and underscores, not starting with a digit"
        )
    return value


def quote_identifier(*parts: str) -> str:
    """Validate each part and join them as a backtick-quoted, dot-separated SQL name."""
    return ".".join(f"`{validate_identifier(p)}`" for p in parts)


def quote_principal(name: str) -> str:
    """A Unity Catalog principal (a group, a user's e-mail, an application id) as a
    backtick-quoted SQL name; a name with a backtick or a control character is refused.

    >>> quote_principal("medallion-readers")
    '`medallion-readers`'
    """
    if not name.strip() or "`" in name or CONTROL_CHARACTERS.search(name):
        raise ConfigError(f"invalid principal {name!r}: no backticks or control characters")
    return f"`{name}`"


def sql_string(value: str) -> str:
    r"""``value`` as a Spark SQL string literal: quoted, backslashes and quotes escaped.

    >>> print(sql_string("/lake/it's\\here"))
    '/lake/it\'s\\here'
    """
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def quote_path(path: str) -> str:
    """``path`` as a backtick-quoted SQL identifier (``delta.`<path>```): backticks doubled."""
    return "`" + path.replace("`", "``") + "`"


CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")


def normalize_path(path: str) -> str:
    """A path without ``.``/``..`` segments or a trailing slash; URIs (``s3://``) keep their scheme."""
    scheme, sep, rest = path.partition("://")
    if not sep:
        scheme, rest = "", path
    normalized = posixpath.normpath(rest) if rest else rest
    if normalized.startswith("//"):  # normpath keeps a leading double slash; one is enough
        normalized = "/" + normalized.lstrip("/")
    return f"{scheme}{sep}{normalized}" if sep else normalized


def path_under(root: str, relative: str) -> str:
    """``root/relative``, refusing any ``relative`` that would leave ``root``."""
    candidate = normalize_path(f"{root}/{relative}")
    if posixpath.isabs(relative) or not (candidate + "/").startswith(root.rstrip("/") + "/"):
        raise ConfigError(f"path {relative!r} escapes its root {root!r}")
    return candidate


def flat_table_name(layer: str, name: str) -> str:
    """A table's name in a schema: ``<layer>_<name>`` (``_system`` tables: ``system_<name>``).

    >>> flat_table_name("_system", "stream_progress")
    'system_stream_progress'
    """
    return validate_identifier(f"{layer.lstrip('_')}_{name}", "table")


@dataclass(frozen=True)
class TableRef:
    """Where one table lives: a path (local) and/or a catalog name (always)."""

    layer: str
    name: str
    path: str | None
    qualified_name: str

    @property
    def key(self) -> str:
        """The table's key in the contract, for example ``silver/events``."""
        return f"{self.layer}/{self.name}"

    @property
    def flat_name(self) -> str:
        """The table's name in its schema, for example ``silver_events``."""
        return flat_table_name(self.layer, self.name)

    @property
    def sql_name(self) -> str:
        """A SQL reference to the table: ``delta.`path``` locally, the catalog name otherwise."""
        if self.path is not None:
            return f"delta.{quote_path(self.path)}"
        return self.qualified_name

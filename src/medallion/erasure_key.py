"""The erasure key: what subject ids are hashed under (HMAC-SHA256), kept out of the lake.

An erased subject is remembered by the keyed hash of its id, never the id. The key is never
written in the lake, so whoever reads the lake cannot hash candidate ids to find who was
erased (a salt stored beside the hashes, the scheme before, did not stop that).

- Locally the key is ``MEDALLION_ERASURE_KEY``.
- On Databricks, without that variable, a task reads it through ``dbutils`` from the secret
  the bundle variables ``erasure_key_scope`` and ``erasure_key_name`` name (the job clusters
  get the names as ``MEDALLION_ERASURE_KEY_SCOPE`` and ``_NAME``; serverless tasks use the
  defaults). It is read only where it is needed: an erasure, or a stream of a lake that has
  erasures, so a workspace without erasures needs no secret.

The lake keeps only the key's check value (:attr:`ErasureKey.check`, an HMAC of a constant): a
run given another key is refused instead of letting erased subjects' lines in again.

>>> key = ErasureKey.parse("an example key, 32 characters long")
>>> keyed_hash(key, "c00042") == keyed_hash(key, "c00042") != keyed_hash(key, "c00043")
True
>>> "an example" in repr(key)
False
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from medallion.errors import ConfigError

KEY_VARIABLE = "MEDALLION_ERASURE_KEY"
# Where a task without the variable finds the key on Databricks (the bundle's defaults).
SCOPE_VARIABLE, NAME_VARIABLE = "MEDALLION_ERASURE_KEY_SCOPE", "MEDALLION_ERASURE_KEY_NAME"
DEFAULT_SCOPE, DEFAULT_NAME = "medallion-erasure", "erasure-key"
MINIMUM_KEY_CHARACTERS = 32
MAKE_KEY = (
    f"export {KEY_VARIABLE}=\"$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')\""
)
_CHECK_MESSAGE = "medallion erasure key check"


class ErasureKey:
    """An erasure key; its text is never shown (``repr`` gives its check value)."""

    __slots__ = ("_secret",)

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    @classmethod
    def parse(cls, text: str) -> ErasureKey:
        """A key from its text; refused when shorter than 32 characters."""
        text = text.strip()
        if len(text) < MINIMUM_KEY_CHARACTERS:
            raise ConfigError(
                f"{KEY_VARIABLE} is too short ({len(text)} characters, at least "
                f"{MINIMUM_KEY_CHARACTERS}); make one with: {MAKE_KEY}"
            )
        return cls(text.encode("utf-8"))

    @property
    def check(self) -> str:
        """What the lake keeps to tell this key from another: 16 hex digits of an HMAC."""
        return keyed_hash(self, _CHECK_MESSAGE)[:16]

    def __repr__(self) -> str:
        return f"ErasureKey(check={self.check})"


def keyed_hash(key: ErasureKey, value: str) -> str:
    """The keyed hash of a subject id (or of a key such as an event id) that the lake keeps:
    HMAC-SHA256 of its UTF-8 bytes under the key, hex."""
    return hmac.new(key._secret, value.encode("utf-8"), hashlib.sha256).hexdigest()


def keyed_hash_column(key: ErasureKey) -> Callable[[Column], Column]:
    """:func:`keyed_hash` of a string column, on the executors (NULL stays NULL).

    A Python function, not Spark's ``sha2`` over the padded key: the key then never enters a
    query plan, which a failed stream's error message and Spark's UI print. It repeats
    :func:`keyed_hash`'s one line rather than calling it, so that what Spark ships to the
    workers holds no medallion object."""
    secret = key._secret

    # Standard library only, no type hints: a worker without medallion runs it (a local
    # session's workers are the PATH's python3), and Spark would read hints as a pandas UDF's.
    def hashed(value, secret=secret):
        if value is None:
            return None
        return hmac.new(secret, value.encode("utf-8"), hashlib.sha256).hexdigest()

    return F.udf(hashed, StringType())


def erasure_key(required: bool = False) -> ErasureKey | None:
    """This process's erasure key: ``MEDALLION_ERASURE_KEY``, else on Databricks the secret
    the bundle names. None when there is none; with ``required``, :class:`ConfigError` naming
    the command that makes one."""
    text = os.environ.get(KEY_VARIABLE, "").strip() or _databricks_secret()
    if text:
        return ErasureKey.parse(text)
    if required:
        raise ConfigError(
            f"no erasure key: erasures hash subject ids under a key kept out of the lake. Make "
            f"one and keep it in your secret store (every run of this lake needs the same one): "
            f"{MAKE_KEY}"
        )
    return None


def _databricks_secret() -> str | None:
    """The key from the bundle's secret scope, on a Databricks runtime whose ``dbutils``
    holds it."""
    if "DATABRICKS_RUNTIME_VERSION" not in os.environ:
        return None
    try:
        # deferred: databricks-sdk, on a Databricks runtime only
        from databricks.sdk.runtime import dbutils
    except ImportError:
        return None
    scope = os.environ.get(SCOPE_VARIABLE, DEFAULT_SCOPE)
    name = os.environ.get(NAME_VARIABLE, DEFAULT_NAME)
    try:
        return dbutils.secrets.get(scope=scope, key=name)
    except Exception:  # dbutils raises its own (Java or SDK) error types: no such secret
        return None

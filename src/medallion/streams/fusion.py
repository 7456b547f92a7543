"""Fused flows: a stream whose batches also do the work of flows downstream of it.

``bronze_events`` carries each batch of input through bronze, silver and gold (its ``fuses``:
``silver_events`` and ``gold_hourly_product_metrics``), so an event is queryable in gold one
batch after it lands. A member of a fusion has no checkpoint while it is fused. It gets one,
and runs as a stream of its own from its Delta source, only to catch up:

- after ``medallion reset`` rebuilt its tables (bronze kept): reset leaves its checkpoint
  folder empty, so it starts from the first version of its source;
- in a lake written before fusion, where every layer ran as a stream of its own.

While a member catches up, the head runs without it and without every member after it (its
batches stop at the stage before), so no batch is applied twice: an available-now run drains
the head, then each member in order, and only then deletes the members' checkpoints. A
streaming run does that first, then streams fused.

The head's checkpoint holds :data:`FUSED_MARKER` from its first fused run on: from then, a
member without a checkpoint is fused. In a head checkpoint without it (a lake from before
fusion), a member whose checkpoint is missing while its tables hold data lost it, and the run
is refused as for any lost checkpoint.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from medallion.config import Config
from medallion.errors import PipelineError
from medallion.storage import delete_folder, folder_exists, list_names, write_text
from medallion.streams.flows import Flow, fusion_head

log = logging.getLogger(__name__)

FUSED_MARKER = "_medallion_fused.json"
# Written by ``medallion reset`` into a member's new checkpoint folder before it deletes the
# member's tables, and removed once they are gone: a run that finds it refuses to start.
RESET_MARKER = "_medallion_reset_in_progress"


@dataclass(frozen=True)
class Fusion:
    """How one head runs in this run: the members it carries, the members catching up."""

    head: Flow
    fused: tuple[str, ...]
    catching_up: tuple[str, ...]


def is_member(flow: Flow, flows: Sequence[Flow] | None = None) -> bool:
    """True when another flow's batches carry out this flow's work."""
    return fusion_head(flow.name, flows) is not None


def is_fused(spark: SparkSession, config: Config, head: Flow) -> bool:
    """True when the head has run fused (its checkpoint holds :data:`FUSED_MARKER`)."""
    return FUSED_MARKER in (list_names(spark, config.checkpoint(head.name)) or [])


def plan(spark: SparkSession, config: Config, head: Flow) -> Fusion:
    """Which of the head's members catch up in this run (those with a checkpoint folder) and
    which it carries (every member before the first one that catches up)."""
    catching_up = []
    for member in head.fuses:
        checkpoint = config.checkpoint(member)
        if not folder_exists(spark, checkpoint):
            continue
        if RESET_MARKER in (list_names(spark, checkpoint) or []):
            raise PipelineError(
                f"a `medallion reset` of stream '{member}' was interrupted before it finished "
                f"(marker {checkpoint}/{RESET_MARKER}): run the same reset again"
            )
        catching_up.append(member)
    first = next((head.fuses.index(m) for m in catching_up), len(head.fuses))
    return Fusion(head, head.fuses[:first], tuple(catching_up))


def plans(spark: SparkSession, config: Config, flows: Sequence[Flow]) -> list[Fusion]:
    """The fusion of every head among ``flows``."""
    return [plan(spark, config, f) for f in flows if f.fuses]


def mark_fused(spark: SparkSession, config: Config, head: Flow) -> None:
    """Record in the head's checkpoint that it runs fused (done before its members' checkpoints
    are deleted, so a crash in between cannot make them look lost)."""
    if not is_fused(spark, config, head):
        marker = f"{config.checkpoint(head.name)}/{FUSED_MARKER}"
        write_text(spark, marker, json.dumps({"fuses": list(head.fuses)}) + "\n")


def finish_catching_up(spark: SparkSession, config: Config, fusion: Fusion) -> None:
    """After the members have caught up (a completed available-now run of the head and then of
    each of them): the head runs fused from now on, and their checkpoints go."""
    mark_fused(spark, config, fusion.head)
    for member in fusion.catching_up:
        delete_folder(spark, config.checkpoint(member))
        log.info("%s caught up; %s carries its work again", member, fusion.head.name)


def lost_member_checkpoint(spark: SparkSession, config: Config, member: Flow) -> bool:
    """True when a member has no checkpoint although it is not fused: its head has run, but
    never fused (a lake from before fusion) and the member's own checkpoint is gone."""
    head = fusion_head(member.name)
    if head is None or folder_exists(spark, config.checkpoint(member.name)):
        return False
    return folder_exists(spark, config.checkpoint(head.name)) and not is_fused(spark, config, head)


def feed_fused(
    spark: SparkSession,
    config: Config,
    feeds: Sequence[Flow],
    inserted: Callable[[], DataFrame],
    batch_id: int,
    checkpoint_of: Callable[[str], str],
    stream_prefix: str,
) -> None:
    """Give the silver rows a batch run outside its stream ``inserted`` (a quarantine replay,
    an erasure's promotion) to each of ``feeds``, the flows fused downstream of that silver
    flow, as batch ``batch_id`` of stream ``<stream_prefix>_<feed>`` (its checkpoint folder:
    ``checkpoint_of(feed name)``). A feed with a checkpoint of its own runs as a stream from
    silver and reads the rows there."""
    for feed in feeds:
        if folder_exists(spark, config.checkpoint(feed.name)):
            continue
        batch = feed.batch_function(
            config, checkpoint_of(feed.name), f"{stream_prefix}_{feed.name}"
        )
        batch(inserted(), batch_id)

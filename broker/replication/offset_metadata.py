"""Where an offset lives on disk, when that is known (Kafka's LogOffsetMetadata helpers).

A high watermark read from a checkpoint, or a follower's LEO learnt from its
fetch offset, is only a message offset until the leader reads at it; the
segment and position are what let a long-polling fetch count the bytes
between two offsets without reading them.
"""

from __future__ import annotations

from broker.log.log import LogOffsetMetadata

UNKNOWN_OFFSET = -1  # Kafka's Log.UnknownOffset
_UNKNOWN_POSITION = -1

UNKNOWN_OFFSET_METADATA = LogOffsetMetadata(UNKNOWN_OFFSET, _UNKNOWN_POSITION, _UNKNOWN_POSITION)


def offset_only(offset: int) -> LogOffsetMetadata:
    """A message offset whose place in the log is not known yet."""
    return LogOffsetMetadata(offset, _UNKNOWN_POSITION, _UNKNOWN_POSITION)


def position_known(metadata: LogOffsetMetadata) -> bool:
    return metadata.segment_base_offset >= 0 and metadata.relative_position_in_segment >= 0


def on_older_segment(metadata: LogOffsetMetadata, other: LogOffsetMetadata) -> bool:
    """`metadata` lies in a segment before `other`'s (both positions must be known)."""
    return metadata.segment_base_offset < other.segment_base_offset


def position_diff(metadata: LogOffsetMetadata, earlier: LogOffsetMetadata) -> int:
    """Bytes from `earlier` to `metadata`, both in the same segment."""
    return metadata.relative_position_in_segment - earlier.relative_position_in_segment

"""File snapshots of Locations in shadow git repositories: taken around Steps, restored by revert."""

from .service import MAX_FILE_BYTES, LocationSnapshots, Snapshots, SnapshotUnreadable, off_reason

__all__ = ["MAX_FILE_BYTES", "LocationSnapshots", "SnapshotUnreadable", "Snapshots", "off_reason"]

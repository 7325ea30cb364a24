"""The snapshots of one Step: the Location before it, when its tools may change files, and after them, when one that
may have ran; what the Step's durable events carry (`snapshot` on its start and end, the changed `files`)."""

from __future__ import annotations

from ..config import Config
from ..location import Location
from .service import LocationSnapshots, Snapshots, off_reason


class StepFiles:
    """`start` is the snapshot the Step begins on (None: none taken). Call `touched` when a tool that may change
    files runs, and `end` once its tools are done."""

    def __init__(self, snaps: LocationSnapshots | None = None, start: str | None = None) -> None:
        self.snaps = snaps
        self.start = start
        self._touched = False

    @classmethod
    async def begin(cls, snapshots: Snapshots | None, location: Location, config: Config,
                    may_change: bool) -> StepFiles:
        """Snapshot the Location for a Step whose tools may change files (where snapshots are on)."""
        if snapshots is None or not may_change or off_reason(location, config) is not None:
            return cls()
        snaps = snapshots.at(location)
        return cls(snaps, await snaps.capture())

    def touched(self) -> None:
        self._touched = True

    async def end(self) -> tuple[str | None, list[str] | None]:
        """The snapshot the Step ends on and the files that differ from its start (None: none)."""
        if self.snaps is None or self.start is None:
            return None, None
        if not self._touched:
            return self.start, None  # nothing that changes files ran: it ends where it started
        end = await self.snaps.capture()
        if end is None:
            return None, None
        return end, (await self.snaps.changed(self.start, end) if end != self.start else None) or None

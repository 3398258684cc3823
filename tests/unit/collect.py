"""A sink that keeps every event, for tests to look at."""

from __future__ import annotations

from inkctl.execute.events import Event


class Collect:
    """Keeps every event."""

    def __init__(self):
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)

    def close(self) -> None:
        pass

    def of(self, kind: type) -> list:
        return [e for e in self.events if isinstance(e, kind)]

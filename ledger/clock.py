"""Timestamps as the ledger writes them: UTC, `YYYY-MM-DDTHH:MM:SS.ffffffZ`.

Always six fractional digits and a `Z`, so that the text of two timestamps sorts as their times
do and one instant has exactly one spelling. A clock is any callable returning an aware datetime;
the Gate takes one so that tests and simulations control time.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Callable

Clock = Callable[[], datetime]

TS_PATTERN = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")  # ASCII digits only


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def format_ts(moment: datetime) -> str:
    """Format an aware datetime as the ledger's UTC timestamp. Raises ValueError if naive."""
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware (UTC)")
    m = moment.astimezone(timezone.utc)
    # Spelled out rather than strftime("%Y"), which does not pad years before 1000 on every libc.
    return f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}.{m.microsecond:06d}Z"


def parse_ts(text: str) -> datetime:
    """Parse a ledger timestamp into an aware UTC datetime. Raises ValueError for any other
    spelling (other digits than ASCII ones included) and for a date or time that does not exist."""
    if not TS_PATTERN.fullmatch(text):
        raise ValueError(f"not a ledger timestamp (YYYY-MM-DDTHH:MM:SS.ffffffZ): {text!r}")
    # The pattern fixed the layout; fromisoformat (C, ten times faster than strptime) checks the
    # calendar: month 13, February 30 and second 60 raise ValueError.
    return datetime.fromisoformat(text[:-1]).replace(tzinfo=timezone.utc)


def is_ts(text: str) -> bool:
    """Whether `text` is a ledger timestamp of a real time (what parse_ts accepts), without
    building the datetime: verify asks this of every event."""
    if not TS_PATTERN.fullmatch(text):
        return False
    try:
        datetime.fromisoformat(text[:-1])
    except ValueError:
        return False
    return True


def seconds_between(start: str, end: str) -> float:
    """Seconds from the ledger time `start` to `end` (negative when `end` is earlier)."""
    return (parse_ts(end) - parse_ts(start)).total_seconds()


def add_seconds(text: str, seconds: float) -> str:
    return format_ts(parse_ts(text) + timedelta(seconds=seconds))


class ManualClock:
    """A clock that moves only when told: `clock.advance(seconds)`, `clock.set(datetime)`."""

    def __init__(self, start: datetime):
        if start.tzinfo is None:
            raise ValueError("the start must be timezone-aware")
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now

    def set(self, moment: datetime) -> None:
        if moment.tzinfo is None:
            raise ValueError("the time must be timezone-aware")
        self.now = moment


_DURATION = re.compile(r"(?:(\d+)([smhd]))")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> int:
    """Seconds in a duration such as `90s`, `30m`, `4h`, `1h30m`, `2d`. Raises ValueError."""
    if not text or not re.fullmatch(r"(?:\d+[smhd])+", text):
        raise ValueError(f"not a duration (such as 30s, 15m, 4h, 1h30m, 2d): {text!r}")
    return sum(int(n) * _UNITS[unit] for n, unit in _DURATION.findall(text))

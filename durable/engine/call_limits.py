"""Named limits on calls (concurrency, rate, tokens per period), held across every worker: how they are declared,
read and keyed, and how many calls a limit admits now. Pure rules: no Django here.

A limit is declared in settings (`DURABLE_LIMITS`) or in code (`durable.limit(...)`), and named by the calls it
applies to (`ctx.activity(..., limit="openai")`). What a limit holds now (calls in flight, call starts and tokens in
the window, a pause) is read from the database by the runtime; `admits` says how many more calls may start, and
`frees_at` when a full limit may admit again.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from durable.engine.errors import DurableError

PERIODS = {"s": 1.0, "m": 60.0, "h": 3600.0}
_RATE = re.compile(r"\s*(\d+)\s*/\s*([smh])\s*")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}")
_PER_FIELD = re.compile(r"(label|input):([A-Za-z_][A-Za-z0-9_]{0,99})")
FIELDS = ("concurrency", "rate", "tokens", "per")
# A rate's window is widened by a margin (seconds; DURABLE_LIMIT_RATE_MARGIN_SECONDS, this by default) so that a
# downstream counting arrivals sees no more than N in any window of the period, although each call reaches it a little
# after its start was recorded (commit, threads, network): a call started at t arrives within [t, t + margin], so N
# starts in any period + margin means N arrivals at most in any period. Costs margin / period of the throughput.
RATE_MARGIN_SECONDS = 0.05


class LimitError(DurableError, ValueError):
    """A limit declared wrongly: names the limit and the field."""

    def __init__(self, limit: str, field_name: str, message: str) -> None:
        super().__init__(f"limit {limit!r}, field {field_name!r}: {message}")
        self.limit = limit
        self.field = field_name


@dataclass(frozen=True)
class Rate:
    """N per period: calls started (rate) or tokens used (tokens)."""

    count: int
    seconds: float

    @classmethod
    def parse(cls, text: object, *, limit: str, field_name: str) -> Rate:
        match = _RATE.fullmatch(text) if isinstance(text, str) else None
        if match is None or int(match.group(1)) < 1:
            raise LimitError(limit, field_name, f'must be "N/s", "N/m" or "N/h" with N at least 1, not {text!r}')
        return cls(int(match.group(1)), PERIODS[match.group(2)])

    def __str__(self) -> str:
        unit = {1.0: "s", 60.0: "m", 3600.0: "h"}.get(self.seconds)
        return f"{self.count}/{unit}" if unit else f"{self.count}/{self.seconds:g}s"


@dataclass(frozen=True)
class LimitSpec:
    """One named limit: any of concurrency (calls at once), rate (call starts per period), tokens (per period),
    each counted per key when `per` says where the key comes from (None: one count for every run)."""

    name: str
    concurrency: int | None = None
    rate: Rate | None = None
    tokens: Rate | None = None
    per: str | None = None  # None, "business_key", or "label:<field>" / "input:<field>" (the run input's field)
    margin: float = RATE_MARGIN_SECONDS  # a rate's window is widened by this (see RATE_MARGIN_SECONDS)

    @classmethod
    def parse(cls, name: object, value: object) -> LimitSpec:
        """The limit as declared (a dict with some of FIELDS), or LimitError naming the limit and the field."""
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise LimitError(str(name), "name", "a limit's name is 1-100 letters, digits, '_', '.', ':' or '-', "
                                                "starting with a letter or digit")
        if not isinstance(value, Mapping):
            raise LimitError(name, "concurrency", f"a limit is a dict of {', '.join(FIELDS)}, not {value!r}")
        unknown = sorted(set(value) - set(FIELDS))
        if unknown:
            raise LimitError(name, str(unknown[0]), f"is not a field of a limit (fields: {', '.join(FIELDS)})")
        concurrency = value.get("concurrency")
        if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(concurrency, int)
                                        or concurrency < 1):
            raise LimitError(name, "concurrency", f"must be a whole number at least 1, not {concurrency!r}")
        rate = Rate.parse(value["rate"], limit=name, field_name="rate") if value.get("rate") is not None else None
        tokens = (Rate.parse(value["tokens"], limit=name, field_name="tokens")
                  if value.get("tokens") is not None else None)
        if concurrency is None and rate is None and tokens is None:
            raise LimitError(name, "concurrency", "a limit sets at least one of concurrency, rate or tokens")
        per = value.get("per")
        if per is not None and per != "business_key" and not (isinstance(per, str) and _PER_FIELD.fullmatch(per)):
            raise LimitError(name, "per", f'must be None, "business_key" or "label:<field of the run\'s input>", '
                                          f"not {per!r}")
        return cls(name, concurrency, rate, tokens, per)

    def as_json(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "rate": str(self.rate) if self.rate else None,
                "tokens": str(self.tokens) if self.tokens else None, "per": self.per}

    @property
    def window_seconds(self) -> float:
        """How far back call starts and tokens count: the longest period, a rate's with its margin."""
        rate = self.rate.seconds + self.margin if self.rate else 0.0
        return max(rate, self.tokens.seconds if self.tokens else 0.0)

    def key_of(self, business_key: str, input: Mapping[str, Any] | None) -> str:
        """The key a run's calls count under: "" for a limit without `per`."""
        if self.per is None:
            return ""
        if self.per == "business_key":
            return business_key
        match = _PER_FIELD.fullmatch(self.per)
        assert match is not None  # parse checked it
        value = (input or {}).get(match.group(2))
        return "" if value is None else str(value)[:200]


def parse_limits(declared: object) -> dict[str, LimitSpec]:
    """DURABLE_LIMITS as set (a dict of name -> fields), or LimitError for the first limit declared wrongly."""
    if declared is None:
        return {}
    if not isinstance(declared, Mapping):
        raise LimitError("DURABLE_LIMITS", "name", f"must be a dict of limit name -> fields, not {declared!r}")
    return {name: LimitSpec.parse(name, value) for name, value in declared.items()}


# Limits declared in code (durable.limit): read with the settings' by durable.runtime.limits; a setting of the same
# name wins (an operator can change a deployed limit without a code change).
declared_in_code: dict[str, LimitSpec] = {}


def limit(name: str, *, concurrency: int | None = None, rate: str | None = None, tokens: str | None = None,
          per: str | None = None) -> LimitSpec:
    """Declare a named limit in code: `durable.limit("openai", concurrency=50, rate="500/m")`. Calls name it with
    `limit="openai"`. LimitError (a ValueError) when a field is wrong."""
    spec = LimitSpec.parse(name, {"concurrency": concurrency, "rate": rate, "tokens": tokens, "per": per})
    declared_in_code[name] = spec
    return spec


@dataclass(frozen=True)
class LimitNow:
    """What a limit (for one key) holds at `now`, as the database says."""

    now: datetime
    in_use: int = 0  # calls in flight (held by a live lease) and capacity granted to woken runs not yet taken
    starts: tuple[datetime, ...] = ()  # call starts within the window, oldest first
    tokens: tuple[tuple[datetime, int], ...] = ()  # tokens used, by when their call started, oldest first
    granted: int = 0  # runs woken with capacity they have not taken yet (their starts are still to come)
    paused_until: datetime | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _in(period: float, now: datetime, at: datetime) -> bool:
    return at > now - timedelta(seconds=period)


def admits(spec: LimitSpec, held: LimitNow) -> int | float:
    """How many more calls may start now (math.inf: no bound from this limit)."""
    if held.paused_until is not None and held.paused_until > held.now:
        return 0
    room: int | float = math.inf
    if spec.concurrency is not None:
        room = min(room, spec.concurrency - held.in_use)
    if spec.rate is not None:
        window = spec.rate.seconds + spec.margin
        started = sum(1 for at in held.starts if _in(window, held.now, at))
        room = min(room, spec.rate.count - started - held.granted)
    if spec.tokens is not None:
        used = sum(count for at, count in held.tokens if _in(spec.tokens.seconds, held.now, at))
        if used >= spec.tokens.count:
            room = 0
    return max(room, 0)


def frees_at(spec: LimitSpec, held: LimitNow) -> datetime | None:
    """When a full limit may admit a call again by the clock alone (a pause ends, a window slides past a start, one
    granted to a woken run included, or a token count); None when only a call giving back its slot frees it
    (concurrency)."""
    times: list[datetime] = []
    if held.paused_until is not None and held.paused_until > held.now:
        times.append(held.paused_until)
    if spec.rate is not None:
        # Room granted to woken runs is starts still to come: counted as starting now, they leave the window one
        # period from now at the earliest (a woken run that starts later makes the waiter ask once more, early).
        window = spec.rate.seconds + spec.margin
        started = sorted(at for at in held.starts if _in(window, held.now, at))
        starts = started + [held.now] * max(held.granted, 0)
        over = len(starts) - spec.rate.count
        if over >= 0 and starts:
            times.append(starts[min(over, len(starts) - 1)] + timedelta(seconds=window))
    if spec.tokens is not None:
        used = [(at, count) for at, count in held.tokens if _in(spec.tokens.seconds, held.now, at)]
        total = sum(count for _, count in used)
        for at, count in sorted(used):  # the time enough of the oldest tokens leave the window
            if total < spec.tokens.count:
                break
            total -= count
            times.append(at + timedelta(seconds=spec.tokens.seconds))
    return max(times) if times else None


def in_order(waiters: Iterable[tuple[int, datetime, int]]) -> list[tuple[int, datetime, int]]:
    """Waiters (priority, arrival, id) in the order they are served: higher priority first, then arrival."""
    return sorted(waiters, key=lambda waiter: (-waiter[0], waiter[1], waiter[2]))


PRIORITY_MIN, PRIORITY_MAX = -100, 100


def check_priority(value: object) -> int:
    """A run's priority as given, or ValueError saying what a priority is."""
    if isinstance(value, bool) or not isinstance(value, int) or not PRIORITY_MIN <= value <= PRIORITY_MAX:
        raise ValueError(f"a priority is a whole number from {PRIORITY_MIN} to {PRIORITY_MAX} (higher goes first), "
                         f"not {value!r}")
    return value

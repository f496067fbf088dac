"""The trainer's event protocol: what the trainer process says as it trains, and how the runner and the record read it.

The trainer (dlbench.frameworks.trainer, through base.Reporter) writes one JSON line per event to its events file
as it happens, flushed: {"e": <event>, "t": <its monotonic clock, s>, ...fields}. A value that is not finite (a
diverged loss) is written null and named under NOT_FINITE, so that every JSON parser reads the file; `read` gives
it back. A trainer that ends by itself says `status` last, and its exit code says the same (EXIT); the exit code
alone says it where the events file could not be written.

Written once here and read by both sides: the Reporter refuses an event or a phase this module does not name, and
the runner and the record read events by these names.

Standard library only: the trainer imports it in every framework's environment.
"""

from __future__ import annotations

import json
from pathlib import Path

from dlbench.atomic import dumps, not_finite

PROCESS_START = "process_start"  # the trainer's first word; pid_started_at: its clock when Python started it
PHASE_START = "phase_start"  # name: one of PHASES
PHASE_END = "phase_end"  # name, duration_s
DATA = "data"  # what the adapter read: digest, train_samples, test_samples, input_shape, validation_samples, ...
PLAN = "plan"  # total_iterations, steps_per_epoch, test_every, display_every, train_samples, test_samples
INFO = "info"  # the framework's word on itself, each key a field of the record (dlbench.record.fields.check_info)
STEP = "step"  # one display interval: iteration, epoch, loss, lr, train_time_s
TEST = "test"  # one test: iteration, epoch, accuracy, loss, test_time_s
VALIDATION = "validation"  # one validation (early stopping): iteration, epoch, accuracy, ...
RESULT = "result"  # the measured outcome (dlbench.frameworks.base.result)
DIVERGED = "diverged"  # iteration, loss
TRACEBACK = "traceback"  # text: the traceback of what failed
STATUS = "status"  # status, reason: the trainer's last word
EVENTS = frozenset({PROCESS_START, PHASE_START, PHASE_END, DATA, PLAN, INFO, STEP, TEST, VALIDATION, RESULT, DIVERGED,
                    TRACEBACK, STATUS})
# The phases a trainer marks, in their order; the record times import, data_load, build and compile by name.
PHASES = ("import", "data_load", "build", "compile", "train", "test")

# The trainer's exit code for each status it ends with by itself (any other: 1).
EXIT = {"ok": 0, "error": 1, "unavailable": 3, "diverged": 4, "disk_full": 5, "env_damaged": 6, "data_changed": 7}

# An event's fields whose values were not finite, by name ({"loss": "inf"}): JSON has no word for them.
NOT_FINITE = "not_finite"


class UnknownEvent(ValueError):
    """An event or phase the protocol does not name (a misspelt one would be an event nobody reads)."""


def check(event: str, fields: dict) -> None:
    """UnknownEvent where `event`, or the phase a phase event names, is not the protocol's."""
    if event not in EVENTS:
        raise UnknownEvent(f"event {event!r} is not the trainer's (dlbench/frameworks/protocol.py: "
                           f"{', '.join(sorted(EVENTS))})")
    if event in (PHASE_START, PHASE_END) and fields.get("name") not in PHASES:
        raise UnknownEvent(f"phase {fields.get('name')!r} is not the trainer's (dlbench/frameworks/protocol.py: "
                           f"{', '.join(PHASES)})")


def encode(event: str, t: float, fields: dict, default=None) -> str:
    """One event as its line (without the newline); UnknownEvent where the protocol does not name it."""
    check(event, fields)
    line = {"e": event, "t": t, **fields}
    if bad := not_finite(line):  # a diverged loss: written null, its value named
        line[NOT_FINITE] = bad
    return dumps(line, default=default)


def parse(text: str) -> list[dict]:
    """The events of an events file's text, up to a line a kill cut short; values that were not finite back."""
    events = json_lines(text)
    for event in events:
        for name, value in event.pop(NOT_FINITE, {}).items():  # written null: JSON has no inf or nan
            event[name] = float(value)
    return events


def json_lines(text: str) -> list:
    """The values of a file of JSON lines, up to a line a kill cut short (parsed as one array where none is: a
    record made again reads thousands of these files)."""
    lines = text.splitlines()
    try:
        return json.loads("[" + ",".join(lines) + "]")
    except json.JSONDecodeError:
        pass
    values = []
    for line in lines:
        try:
            values.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut by a kill
            break
    return values


def read(path: str | Path) -> list[dict]:
    """The events of an events file (none where there is no file)."""
    path = Path(path)
    return parse(path.read_text(errors="replace")) if path.exists() else []


def first(events: list[dict], event: str) -> dict:
    """The first event of a kind ({} where there is none)."""
    return next((e for e in events if e["e"] == event), {})


def last_status(events: list[dict]) -> str | None:
    """The status the trainer reported last; None where it reported none."""
    return next((e["status"] for e in reversed(events) if e["e"] == STATUS), None)

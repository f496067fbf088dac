"""The trainer's event protocol, written once (dlbench.frameworks.protocol): what the Reporter writes is what the
runner and the record read back, an event or phase it does not name is refused where it is emitted, and every
exit code stands for a status the record knows."""

import math

import pytest

from dlbench.frameworks import protocol
from dlbench.frameworks.base import Reporter
from dlbench.record import statuses


def test_what_the_reporter_writes_is_read_back_values_that_are_not_finite_too(tmp_path):
    path = tmp_path / "events.jsonl"
    reporter = Reporter(path)
    with reporter.phase("train"):
        reporter.emit(protocol.STEP, iteration=1, loss=float("inf"), lr=0.01)
        reporter.emit(protocol.STEP, iteration=2, loss=float("nan"))
    reporter.emit(protocol.STATUS, status="diverged", reason="loss became inf")
    reporter.close()
    for line in path.read_text().splitlines():  # strict JSON: no Infinity, NaN
        assert "Infinity" not in line and "NaN" not in line
    events = protocol.read(path)
    assert [e["e"] for e in events] == ["phase_start", "step", "step", "phase_end", "status"]
    assert events[1]["loss"] == math.inf and math.isnan(events[2]["loss"]) and events[1]["lr"] == 0.01
    assert protocol.last_status(events) == "diverged" and protocol.first(events, protocol.STEP)["iteration"] == 1


def test_a_line_cut_by_a_kill_ends_the_events(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text(protocol.encode(protocol.PROCESS_START, 1.0, {}) + "\n" + '{"e": "step", "t": 2.0, "iter')
    assert [e["e"] for e in protocol.read(path)] == ["process_start"]
    assert protocol.read(tmp_path / "none.jsonl") == [] and protocol.last_status([]) is None


def test_an_event_or_phase_the_protocol_does_not_name_is_refused_where_it_is_emitted(tmp_path):
    reporter = Reporter(tmp_path / "events.jsonl")
    with pytest.raises(protocol.UnknownEvent, match="event 'stepp' is not the trainer's"):
        reporter.emit("stepp", iteration=1)
    with pytest.raises(protocol.UnknownEvent, match="phase 'warmup' is not the trainer's"):
        with reporter.phase("warmup"):
            pass
    reporter.close()
    assert (tmp_path / "events.jsonl").read_text() == ""  # nothing half written


def test_every_exit_code_is_a_status_the_record_knows_and_none_is_the_retry_code():
    known = set(statuses.RESULTS) | set(statuses.RETRIED)
    assert set(protocol.EXIT) <= known, set(protocol.EXIT) - known
    assert len(set(protocol.EXIT.values())) == len(protocol.EXIT) and statuses.EXIT_RETRY not in protocol.EXIT.values()
    assert protocol.EXIT["ok"] == 0

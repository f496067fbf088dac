"""A call that may hang, made with a deadline: NVML's, where a hung driver must not hold a job that may hold the
node's measurement lock. The call runs in a daemon thread; past its deadline it is left to finish or hang alone."""

from __future__ import annotations

import threading

NVML_TIMEOUT_S = 5.0  # longest an NVML call may take before the GPU readings are given up (a hung driver)


def unanswered() -> str:
    """A record's gpu_state where NVML did not answer within NVML_TIMEOUT_S."""
    return f"unknown: NVML did not answer within {NVML_TIMEOUT_S:g} s (a hung driver?)"


def bounded(fn, timeout_s: float):
    """fn() in a thread of its own, waited for at most timeout_s: its result, or TimeoutError (the thread is
    left to finish or hang on its own; it is a daemon, so it never keeps the process alive)."""
    box: list = []
    thread = threading.Thread(target=lambda: box.append(_outcome(fn)), name="dlbench-bounded", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if not box:
        raise TimeoutError(f"no answer within {timeout_s:g} s")
    ok, value = box[0]
    if not ok:
        raise value
    return value


def _outcome(fn) -> tuple[bool, object]:
    try:
        return True, fn()
    except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread as it was
        return False, exc

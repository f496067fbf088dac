"""`select:` and `exclude:`: a study cut down after its sweep is expanded, so that every sub-study is reached.

select keeps the points that match every key it gives, exclude then drops those that match any key it gives.
A key is a point's framework, dataset, device or preset, a sub-study it belongs to (`study`), or the status of
its existing record (`status`; `none` where it has none yet). Each key is applied in turn, so that the dry
run can say how many points each one removed.

A point shared by several sub-studies (it runs once) stays while one of its sub-studies does: excluding a
sub-study drops only the points no other sub-study needs, and the sub-studies left out are taken off each point's
list.
"""

from __future__ import annotations

from collections.abc import Callable

KEYS = ("framework", "dataset", "device", "preset", "study", "status")
NO_RECORD = "none"


def _values(point: dict, key: str, status_of: Callable[[dict], str | None] | None) -> set:
    if key == "status":
        status = status_of(point) if status_of else None
        return {status or NO_RECORD}
    return {point[key]}


def apply(points: list[dict], membership: dict[str, list[str]], cfg: dict,
          status_of: Callable[[dict], str | None] | None = None
          ) -> tuple[list[dict], dict[str, list[str]], dict[str, int]]:
    """The points the config's select and exclude keep, their sub-studies, and how many points each key removed
    (`select.framework`: n).

    status_of: a point's record status (None: no record), read only where a filter names `status`.
    """
    removed: dict[str, int] = {}
    kept, membership = points, dict(membership)
    for how, rule in (("select", cfg.get("select") or {}), ("exclude", cfg.get("exclude") or {})):
        for key in KEYS:
            if key not in rule:
                continue
            wanted = set(rule[key])
            if key == "study":  # a sub-study's name: what remains of each point's sub-studies decides
                membership = {i: [s for s in m if (s in wanted) == (how == "select")] for i, m in membership.items()}
                keep = [bool(membership.get(p["id"])) for p in kept]
            else:
                matches = [bool(_values(p, key, status_of) & wanted) for p in kept]
                keep = matches if how == "select" else [not m for m in matches]
            removed[f"{how}.{key}"] = len(kept) - sum(keep)
            kept = [p for p, k in zip(kept, keep) if k]
    ids = {p["id"] for p in kept}
    return kept, {i: m for i, m in membership.items() if i in ids}, removed


def describe(removed: dict[str, int], total: int, kept: int) -> str:
    """The dry run's line: what each key removed, and how many points remain."""
    parts = ", ".join(f"{key} removed {n}" for key, n in removed.items())
    return f"dlbench: {parts}; {kept} of {total} points remain"

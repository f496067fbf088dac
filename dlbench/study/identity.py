"""A point's identity from its parameters alone: the same parameters give the same digest on any machine.

Standard library only, and apart from the sweep's expansion: the runner stamps each record with its setting.
"""

from __future__ import annotations

import hashlib
import json


def digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def setting_id(p: dict) -> str:
    """A digest of a point's parameters but its repeat and seed: the same for all its repeats, on any machine."""
    return digest({k: v for k, v in p.items() if k not in ("id", "repeat", "seed")})[:10]

"""Reading numeric settings from environment variables, with messages that name the variable."""

from __future__ import annotations

import math
from collections.abc import Mapping

from pytest_faultloop.models.errors import ConfigError


def env_int(env: Mapping[str, str], name: str, default: int, *, minimum: int) -> int:
    """``env[name]`` as an integer ≥ ``minimum``; ``default`` when unset or empty."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise ConfigError(f"{name}={value} must be at least {minimum}")
    return value


def env_float(env: Mapping[str, str], name: str, default: float, *, minimum: float) -> float:
    """``env[name]`` as a number of seconds ≥ ``minimum``; ``default`` when unset or empty."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number of seconds") from None
    if not math.isfinite(value):
        raise ConfigError(f"{name}={raw!r} is not a number of seconds")
    if value < minimum:
        raise ConfigError(f"{name}={value} must be at least {minimum}")
    return value

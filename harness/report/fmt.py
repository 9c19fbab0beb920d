"""Formatting for the site: numbers, times, slugs, ids, encodings.

Pure functions of their arguments; every page module formats through these so
the templates receive finished strings.
"""

from __future__ import annotations

import base64
import datetime as _dt
import functools
import hashlib
import json
import math
import re

import numpy as np


def dumps(obj, **_kw) -> str:
    """Deterministic compact JSON (sorted keys, no NaN) for the data files and page data."""
    return json.dumps(obj, sort_keys=True, allow_nan=False, separators=(",", ":"))


def fmt(x, digits: int = 4) -> str:
    """Significant-digit formatting; ``None`` renders as ``n/a``."""
    if x is None:
        return "n/a"
    if isinstance(x, float) and not math.isfinite(x):
        return "n/a"
    return f"{x:.{digits}g}"


def pct(x) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{100 * x:.1f}%"


def signed_pct(x) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{100 * x:+.1f}%"


def fmt_time(seconds) -> str:
    """A time in the unit that reads best (s, ms, us, ns)."""
    if seconds is None or not math.isfinite(seconds):
        return "n/a"
    a = abs(seconds)
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")):
        if a >= scale or unit == "ns":
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds:.4g} s"


def fmt_value(v, unit: str | None) -> str:
    if v is None:
        return "n/a"
    if unit == "seconds":
        return fmt_time(v)
    return f"{v:.4g} {unit or ''}".strip()


def slug(text: str, n: int = 60) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:n].strip("._") or "x"
    return f"{safe}-{hashlib.sha1(text.encode()).hexdigest()[:8]}"


@functools.lru_cache(maxsize=None)
def bench_slug(name: str) -> str:
    """File-name-safe, collision-free id of a benchmark name."""
    return slug(name, 80)


def machine_slug(name: str) -> str:
    return slug(name, 60)


def case_id(benchmark: str, params, timing) -> str:
    """Id of a case (benchmark x parameters x timing), the same on every machine."""
    return "c" + hashlib.sha1(repr((benchmark, tuple(map(tuple, params)), timing)).encode()).hexdigest()[:10]


def date_text(ms) -> str | None:
    if ms is None:
        return None
    return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M")


def b64(arr: np.ndarray, dtype: str) -> str:
    return base64.b64encode(np.ascontiguousarray(arr, dtype=dtype).tobytes()).decode("ascii")


def num(x) -> float | None:
    if x is None or isinstance(x, bool):
        return None
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def params_text(params) -> str:
    return ", ".join(f"{k}={v}" for k, v in params)

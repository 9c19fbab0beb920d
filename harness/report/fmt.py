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

from harness.core.metrics import STATUS_ABOVE_CEILING
from harness.core.model import ABOVE_CEILING_LABEL, DOUBTFUL_CEILING_LABEL, change_text, signed_pct  # noqa: F401  (the one change wording)


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
    """A file-name-safe, collision-free id of ``text``: its ``[A-Za-z0-9_.-]`` characters
    (at most ``n``) and 8 hex digits of a SHA-1 of all of it. A lone surrogate (a
    folder name of non-UTF-8 bytes, as Python lists it) is hashed as is
    (``surrogatepass``), never an ``UnicodeEncodeError`` (issue 29 F3)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:n].strip("._") or "x"
    return f"{safe}-{hashlib.sha1(text.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


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


#: Largest finite float32 (IEEE 754 binary32), the chart arrays' type.
F32_MAX = float(np.finfo(np.float32).max)


def beyond_f32(arr) -> np.ndarray:
    """Mask of the finite values of ``arr`` a float32 cannot hold (``|x| > F32_MAX``)."""
    a = np.asarray(arr, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return np.isfinite(a) & (np.abs(a) > F32_MAX)


def b64(arr: np.ndarray, dtype: str) -> str:
    """Base64 of ``arr`` as ``dtype``. For ``<f4``, values beyond the float32
    range become NaN (a gap, never ``inf``); callers give them a status."""
    if dtype == "<f4":
        arr = np.asarray(arr, dtype=np.float64)
        big = beyond_f32(arr)
        if big.any():
            arr = np.where(big, np.nan, arr)
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


# ----------------------------------------------------------------------------- units people read

#: A utilisation (mfu, bw_util, sol) above 1 is never printed as a plain number:
#: the read-time guards reject anything above a peak or ceiling by more than the
#: margin, and what is left between 100% and the margin is measurement noise.
UTIL_NOTE = (
    "above 100% of the peak or ceiling, within the 5% guard margin "
    "(harness.core.metrics.PEAK_MARGIN): noise of the peak or the time, not a speed-up"
)


def plural(n, word: str, words: str | None = None) -> str:
    """``"1 point"``, ``"2 points"``: ``n`` and ``word``, or ``words`` (default
    ``word + "s"``) unless ``n`` is 1. ``n`` that is not a number reads as is."""
    many = words if words is not None else word + "s"
    return f"{n} {word if n == 1 else many}"


def badge(status, reason=None, css: str = "bad"):
    """A status as a badge with its reason on hover: ``<span class="badge bad" title=reason>status</span>``
    (escaped). The one way a figure with a guard status reaches a page: never a
    plain number. ``None`` or ``"ok"`` renders as an empty string."""
    from markupsafe import Markup, escape

    if status in (None, "", "ok"):
        return Markup("")
    title = f' title="{escape(reason)}"' if reason else ""
    return Markup(f'<span class="badge {escape(css)}"{title}>{escape(label(status))}</span>')


#: How a page names a stored status whose stored spelling is not the page's word.
LABELS = {STATUS_ABOVE_CEILING: ABOVE_CEILING_LABEL}


def label(status) -> str:
    """The page's word for a status (``str``): :data:`LABELS`, else the status
    itself; ``above_ceiling`` reads :data:`harness.core.model.ABOVE_CEILING_LABEL`."""
    return LABELS.get(str(status), str(status))


def util(x):
    """A utilisation fraction as a percentage; ``n/a`` when unknown; above 100% the
    badge :data:`harness.core.model.ABOVE_CEILING_LABEL` (a status, never the number), the measured percentage and :data:`UTIL_NOTE` in its
    title (on hover), never as a number on the page."""
    if x is None or isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return "n/a"
    if x > 1:
        return badge(ABOVE_CEILING_LABEL, f"{100 * x:.1f}% measured: {UTIL_NOTE}", css="warn")
    return f"{100 * x:.1f}%"


def flops_rate(tflops) -> str:
    """A FLOP rate given in TFLOP/s, in the unit that reads: TFLOP/s from 1,
    GFLOP/s from 0.1 GFLOP/s (a CPU's 0.0001 TFLOP/s is 0.1 GFLOP/s), else MFLOP/s;
    ``n/a`` when unknown or zero (an op with no floating-point work, a copy or
    a transpose, has no FLOP rate)."""
    if tflops is None or isinstance(tflops, bool) or not isinstance(tflops, (int, float)) or not math.isfinite(tflops):
        return "n/a"
    if tflops <= 0:
        return "n/a"
    if tflops >= 1:
        return f"{tflops:.4g} TFLOP/s"
    if tflops >= 1e-4:
        return f"{tflops * 1e3:.4g} GFLOP/s"
    return f"{tflops * 1e6:.4g} MFLOP/s"


def gib(nbytes) -> str:
    """A byte count as GiB (2**30 bytes), ``n/a`` when not a number."""
    try:
        v = float(nbytes)
    except (TypeError, ValueError):
        return "n/a"
    if not math.isfinite(v) or v < 0:
        return "n/a"
    return f"{v / 2**30:.1f} GiB"


#: ASCII digits only: ``"²".isdigit()`` is true but ``int("²")`` fails (hostile trial).
_DIGITS = re.compile(r"([0-9]+)")
#: A digit run longer than this is ordered after every shorter number, by its text:
#: ``int()`` refuses strings of more than 4,300 digits (hostile trial: a 5,000-digit parameter).
_MAX_KEY_DIGITS = 1000


def natural_key(x):
    """Sort key that orders the numbers inside strings numerically (``256x1024``
    before ``1024x1024``, ``n=9`` before ``n=10``); tuples and lists element-wise."""
    if isinstance(x, (tuple, list)):
        return tuple(natural_key(v) for v in x)
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return ((0, float(x), ""),)
    return tuple(
        ((0, int(p), "") if len(p) <= _MAX_KEY_DIGITS else (0, math.inf, p)) if _DIGITS.fullmatch(p) else (1, 0, p)
        for p in _DIGITS.split(str(x))
        if p != ""
    )

"""Environment variables that kernelwatch reads, each checked against a named
accepted range before it is used (issue 29).

An unchecked variable did damage far from where it was set:
``KERNELWATCH_CPU_THREADS=999999`` segfaulted in calibration,
``KERNELWATCH_HOST=-x`` was read by asv as an option, ``KERNELWATCH_HOST=.x``
put results in a folder ``publish`` skips as hidden, ``KERNELWATCH_LOCK_WAIT_S=nan``
waited forever, ``KERNELWATCH_DEBUG=0`` turned debugging on. Each reader here
raises :class:`EnvError` (a ``ValueError``) whose message names the variable, the
value and what is accepted.
"""

from __future__ import annotations

import math
import os
import re

#: Values of a yes/no variable (case-insensitive; surrounding blanks ignored).
FLAG_ON = ("1", "true", "yes", "on")
FLAG_OFF = ("", "0", "false", "no", "off")

#: A host name usable as the first part of an asv machine name, a folder name and
#: an asv argument: letters, digits, ``_ . -``, not starting with ``-`` (an option
#: to asv) or ``.`` (a hidden folder that ``publish`` and ``analyze`` skip); at most
#: 63 characters (one DNS label, RFC 1035).
HOST_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
HOST_ACCEPTED = "1 to 63 letters, digits, '_', '.' or '-', starting with a letter or digit"


#: An asv machine name (``KERNELWATCH_MACHINE``): the results folder of the machine
#: (``<results>/<machine>/``) and an asv argument, so the same characters as a host,
#: at most 128 of them (a host of 63 plus a device slug, :func:`harness.core.devices.machine_name_for`).
MACHINE_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
MACHINE_ACCEPTED = (
    "an asv machine name such as 'myhost-h100-80gb-hbm3': 1 to 128 letters, digits, '_', '.' or '-', "
    "starting with a letter or digit"
)


class EnvError(ValueError):
    """An environment variable outside its accepted range; the message names both."""


def flag(name: str, environ=None) -> bool:
    """``True`` for :data:`FLAG_ON`, ``False`` for :data:`FLAG_OFF` or unset: the one
    reader of every yes/no variable (``KERNELWATCH_DEBUG``, ``KERNELWATCH_QUICK``,
    ``KERNELWATCH_EXCLUDE_THROTTLED``, ``KERNELWATCH_PUBLISH_TIMES``), so ``false``,
    ``off`` and ``no`` mean off everywhere (hostile trial h29t S1).

    Raises
    ------
    EnvError
        Any other value (``KERNELWATCH_DEBUG=maybe``), naming the accepted values.
    """
    raw = (os.environ if environ is None else environ).get(name)
    if raw is None:
        return False
    v = raw.strip().lower()
    if v in FLAG_ON:
        return True
    if v in FLAG_OFF:
        return False
    raise EnvError(f"{name}={raw!r}: expected one of {'/'.join(FLAG_ON)} (on) or {'/'.join(FLAG_OFF[1:])} (off)")


def number(name: str, default: float, lo: float, hi: float, unit: str = "", environ=None) -> float:
    """A finite number in ``[lo, hi]`` from ``$name``, ``default`` when unset or blank.

    Raises
    ------
    EnvError
        Not a number, ``nan``, ``inf``, or outside ``[lo, hi]`` (the message names the range).
    """
    raw = (os.environ if environ is None else environ).get(name)
    if raw is None or not raw.strip():
        return default
    try:
        v = float(raw)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and lo <= v <= hi):
        raise EnvError(f"{name}={raw!r}: expected a number from {lo:g} to {hi:g}{(' ' + unit) if unit else ''}")
    return v


def integer(name: str, lo: int, hi: int, raw: str) -> int:
    """``raw`` (the value of ``$name``) as an integer in ``[lo, hi]``.

    Raises
    ------
    EnvError
        Not an integer or outside ``[lo, hi]`` (the message names the range).
    """
    try:
        v = int(raw.strip())
    except ValueError:
        v = lo - 1
    if not lo <= v <= hi:
        raise EnvError(f"{name}={raw!r}: expected an integer from {lo} to {hi}")
    return v


def host(name: str = "KERNELWATCH_HOST", environ=None) -> str | None:
    """The host name from ``$name`` (``None`` when unset or blank), checked against
    :data:`HOST_PATTERN`.

    Raises
    ------
    EnvError
        A value that is not a usable host name (:data:`HOST_ACCEPTED`).
    """
    raw = (os.environ if environ is None else environ).get(name)
    if raw is None or not raw.strip():
        return None
    if not HOST_PATTERN.fullmatch(raw):
        raise EnvError(f"{name}={raw!r}: expected {HOST_ACCEPTED}")
    return raw


def machine(name: str = "KERNELWATCH_MACHINE", environ=None) -> str | None:
    """The asv machine name from ``$name`` (``None`` when unset or blank), checked
    against :data:`MACHINE_PATTERN`: it becomes the folder ``<results>/<machine>/``
    records are written to, so ``../x`` or ``/tmp/x`` would write outside the results.

    Raises
    ------
    EnvError
        A value that is not a usable machine name (:data:`MACHINE_ACCEPTED`).
    """
    raw = (os.environ if environ is None else environ).get(name)
    if raw is None or not raw.strip():
        return None
    if not MACHINE_PATTERN.fullmatch(raw):
        raise EnvError(f"{name}={raw!r}: expected {MACHINE_ACCEPTED}")
    return raw

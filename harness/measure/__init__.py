"""Measuring: timing, clocks, calibration, selfcheck, the asv benchmark bridge and
plugin, and ``kernelwatch run``.

May import :mod:`harness.core`; :mod:`.runner` also reads :mod:`harness.store`
(to skip commits already measured). Never analysis, report, gate or cli.
"""

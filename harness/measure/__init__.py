"""Measuring: timing, clocks, calibration, selfcheck, the asv benchmark bridge and ``kernelwatch run``.

May import :mod:`harness.core` only.
"""

"""Measuring: timing, clocks, calibration, selfcheck, the asv benchmark bridge and
plugin, ``kernelwatch run``, and ``kernelwatch profile`` (:mod:`.profile`: torch.profiler
traces, per-kernel tables) and the Triton compile facts of a record (:mod:`.compile_facts`).

May import :mod:`harness.core`; :mod:`.runner` also reads :mod:`harness.store`
(to skip commits already measured). Never analysis, report, gate or cli.
"""

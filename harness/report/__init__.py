"""Reporting: the static site. Dataset + findings in, files out.

May import :mod:`harness.core`, :mod:`harness.store` and :mod:`harness.analysis`; never measure, gate or cli.
"""

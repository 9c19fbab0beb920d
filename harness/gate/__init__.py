"""Gating: PR gate decisions (:mod:`.decide`), ``kernelwatch check`` and ``bisect``.

May import core, store, measure and analysis; never cli or report.
"""

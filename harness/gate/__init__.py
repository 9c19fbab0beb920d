"""Gating: PR gate decisions (:mod:`.decide`), ``kernelwatch check`` and ``bisect``,
and ``kernelwatch triage`` (:mod:`.triage`: base-vs-head profile diff).

May import core, store, measure and analysis; never cli or report.
"""

"""Storing and loading: one asv results file (:mod:`.asvfile`), results directories
(:mod:`.results`, asv v1/v2 plus our records and calibrations), foreign importers
(:mod:`.importers`), and the dataset every consumer reads (:mod:`.dataset`).

May import :mod:`harness.core` and the model types of :mod:`harness.analysis`
(the dataset builds its series); never measure, report, gate or cli.
"""

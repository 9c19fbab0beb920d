"""Core: device specs and peaks (:mod:`.devices`), the one cost registry
(:mod:`.costs`), the one metrics module (:mod:`.metrics`), the record schema
(:mod:`.records`).

Imports no other stage of :mod:`harness`.
"""

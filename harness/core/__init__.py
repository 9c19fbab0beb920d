"""Core: device specs and peaks (:mod:`.devices`), the one cost registry
(:mod:`.costs`), the one metrics module (:mod:`.metrics`), the read guards
(:mod:`.guards`), the record schema
(:mod:`.records`), the type and shape check of every input file (:mod:`.schema`).

Imports no other stage of :mod:`harness`.
"""

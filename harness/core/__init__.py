"""Core: device specs and peaks, the cost registry, the one metrics module, the record schema.

Imports nothing else of :mod:`harness`.
"""

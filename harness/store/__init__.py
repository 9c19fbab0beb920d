"""Storing and loading: asv results (v1/v2), foreign importers, the in-memory dataset.

May import :mod:`harness.core` only.
"""

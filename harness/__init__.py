"""kernelwatch harness: timing, devices, metrics, records, analysis, site and CLI."""

#: Recorded in every record and asv machine entry; bump it when timing or metric
#: semantics change so the change shows as an environment change, not a regression.
__version__ = "0.3.0"  # 0.3: cpu timing sets its thread count, excludes contended samples

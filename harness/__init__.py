"""kernelwatch harness, one subpackage per stage (docs/architecture.md):
``core`` (devices, costs, metrics, records), ``measure``, ``store``, ``analysis``,
``report``, ``gate`` and ``cli``; imports run from cli down to core."""

#: Recorded in every record and asv machine entry; bump it when timing or metric
#: semantics change so the change shows as an environment change, not a regression.
__version__ = "0.3.0"  # 0.3: cpu timing sets its thread count, excludes contended samples

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Import order matters: kernels._backends sets TRITON_INTERPRET=1 on machines
# without a GPU before any test module imports triton.
import kernels  # noqa: E402,F401

SHARED = (ROOT.parent / "shared").resolve()
SHARED_DATA = SHARED / "data"
#: Real asv results in the repository: a 30-commit slice of OpenBLAS's, 3 machines
#: (examples/openblas/README.md). The whole history is SHARED_DATA / "asv-openblas".
OPENBLAS_EXAMPLE = ROOT / "examples" / "openblas"

# The results cache (harness.store.parse_cache) is on by default for the
# command line; tests that want it give a folder of their own.
os.environ["KERNELWATCH_CACHE"] = "off"

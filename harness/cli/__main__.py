"""``python -m harness.cli``: the same entry point as the ``kernelwatch`` script."""

import sys

from harness.cli import main

sys.exit(main())

"""``python -m pytest_dlbench.cli``: the ``dlbench`` command."""

import sys

from pytest_dlbench.cli import main

sys.exit(main())

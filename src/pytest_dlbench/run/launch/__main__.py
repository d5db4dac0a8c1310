"""``python -m pytest_dlbench.run.launch node|launch`` (see :mod:`.nodes`)."""

import sys

from pytest_dlbench.run.launch.nodes import main

sys.exit(main())

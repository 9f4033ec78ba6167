"""``python -m tracker.sim MODEL [vLLM flags]``: see tracker.sim.standalone."""

import sys

from tracker.sim.standalone import main

sys.exit(main())

"""``python -m compaction.cli``: the ``compaction`` command."""

import sys

from compaction.cli import main

sys.exit(main())

"""``python -m compaction.testing.transcripts``: see :func:`compaction.testing.transcripts.main`."""

from compaction.testing.transcripts._cli import main

raise SystemExit(main())

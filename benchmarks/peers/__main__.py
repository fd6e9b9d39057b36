"""``python -m benchmarks.peers``: see :mod:`benchmarks.peers.driver`."""

from benchmarks.peers.driver import main

raise SystemExit(main())

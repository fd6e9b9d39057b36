"""The stores' row helpers under their first import path; they live in :mod:`compaction.stores.rows`."""

from compaction.stores.rows import *  # noqa: F403
from compaction.stores.rows import __all__ as __all__

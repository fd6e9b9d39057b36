"""Adapters for the runtimes people already use, each in its own module behind an optional extra.

Nothing here is imported by ``import compaction``: import the module you need, e.g.
``from compaction.integrations.langchain import CompactionMiddleware``.
"""

"""Stages of the compaction pipeline: pruning, ledger, protection, chunking, summarizing, reconstruction."""

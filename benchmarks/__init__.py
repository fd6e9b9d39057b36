"""Benchmarks of the compaction engine.

* ``benchmarks.generate`` - seeded synthetic agent sessions with planted facts (ground truth).
* ``benchmarks.bench_tokens`` - token accounting.
* ``benchmarks.bench_pipeline`` - fit, integrity, planning overhead, latency, summarizer input.
* ``benchmarks.bench_summarizers`` - extractive throughput, LLMSummarizer per-call overhead.
* ``benchmarks.run_all`` - all of them; writes ``benchmarks/RESULTS.md``.
"""

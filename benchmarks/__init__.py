"""Benchmarks of the compaction engine.

* ``benchmarks.generate`` - seeded synthetic agent sessions with planted facts (ground truth); the
  generator is :mod:`compaction.testing.transcripts`, re-exported here.
* ``benchmarks.common`` - the helpers several benchmarks use (counting, profiling, reading results,
  servers in subprocesses, a synthetic transcript); a benchmark imports these, not another's helpers.
* ``benchmarks.bench_tokens`` - token accounting.
* ``benchmarks.bench_pipeline`` - fit, integrity, planning overhead, latency, summarizer input.
* ``benchmarks.bench_summarizers`` - extractive throughput, LLMSummarizer per-call overhead.
* ``benchmarks.run_all`` - all of them; writes ``benchmarks/RESULTS.md``.
"""

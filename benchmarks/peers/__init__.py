"""Peer comparison: ours against LangChain, LangMem and OpenClaw on the same transcripts and fake model.

Run by the ``peers`` nox session (not part of CI), which installs the peers into its own
environments at run time: ``langchain<1.5``, ``langchain-openai`` and ``langmem`` into its uv venv,
and ``openclaw@2026.1.30`` with ``@mariozechner/pi-coding-agent@0.50.7`` with
``npm install --prefix .nox/.cache/peers-openclaw`` (nothing of theirs is in this repository)::

    python3 -m nox -s peers                    # writes the "## Peers" section of benchmarks/RESULTS.md
    python3 -m nox -s peers -- --sizes 500     # one size only

Modules:

* :mod:`benchmarks.peers.common` - settings shared by every run, the fake model's responder, and the
  measurements (exact o200k recount of the output against the budget, pair violations, calls and
  tokens sent from the fake provider's recorded requests, planted-fact retention);
* :mod:`benchmarks.peers.run_ours`, :mod:`~benchmarks.peers.run_langchain`,
  :mod:`~benchmarks.peers.run_langmem`, :mod:`~benchmarks.peers.run_openclaw` - one runner each:
  the transcript in, the compacted context back as OpenAI chat dicts;
* ``openclaw_runner.mjs`` - the Node side of the OpenClaw runner (imports OpenClaw's and pi's dist files);
  ``openclaw_convert.mjs`` - the OpenAI -> pi message conversion both Node runners share;
* :mod:`benchmarks.peers.incremental` with ``openclaw_incremental.mjs`` - the incremental mode: a
  session fed one message at a time, compacted at 0.8 of the window; library CPU per compaction,
  ours (trees side by side) and OpenClaw's (``python -m benchmarks.peers.incremental --help``);
* :mod:`benchmarks.peers.driver` - generates the transcripts, starts one fake provider, runs
  everyone, renders the tables and writes them into RESULTS.md.
"""

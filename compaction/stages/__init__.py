"""Stages of the compaction pipeline, in the order it runs them: layout (fit what is kept), plan
(the zone's view, the job, the chunks), summarize, block (the summary block's contents), verify;
and the parts they use: protect, prune, view, chunk, ledger, reconstruct."""

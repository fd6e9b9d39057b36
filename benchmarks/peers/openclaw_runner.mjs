// Runs OpenClaw's own compaction (npm openclaw@2026.1.30 on @mariozechner/pi-coding-agent@0.50.7) on one
// transcript, the way OpenClaw's embedded runner does on `/compact` or after a context overflow:
//
//   1. pi's SessionManager (in memory) holds the session: one entry per message.
//   2. pi's prepareCompaction(branch, settings) picks the cut point (keepRecentTokens, never at a tool result)
//      and the messages to summarize (plus the prefix of a split turn).
//   3. OpenClaw's default compaction mode, "safeguard" (its config default), runs as the pi extension does:
//      the `session_before_compact` handler of dist/agents/pi-extensions/compaction-safeguard.js
//      (history-share pruning, adaptive chunk ratio, summarizeInStages -> summarizeWithFallback ->
//      pi's generateSummary, Tool Failures section, read/modified file lists).
//   4. pi's appendCompaction + buildSessionContext rebuild the context (summary message + kept messages).
//   5. pi's convertToLlm and pi-ai's OpenAI-completions request builder turn it into the wire messages
//      (captured with `onPayload`, so that last step sends nothing).
//
// The model is pi-ai's "openai-completions" API pointed at the benchmark's fake provider (an
// OpenAI-compatible base URL); every summarizer call is a real HTTP request that the fake records.
// Nothing of OpenClaw lives in this repository: the modules are imported from the node_modules
// directory that the `peers` nox session installs (`--modules`).
//
//   node openclaw_runner.mjs --modules DIR/node_modules --input in.json --output out.json
//
// Input: {base_url, api_key, model, context_window, max_output_tokens, reserve_tokens,
//         keep_recent_tokens | keep_recent_messages, system, messages (OpenAI chat format, no system)}.
// Output: {ok, error, wall_ms, import_ms, phases, payload (the OpenAI request body minus nothing),
//          warnings, preparation figures}.

import { writeFileSync } from "node:fs";

import {
  compactionSettings,
  loadOpenClaw,
  piModel,
  requestPayload,
  runnerArguments,
  safeguardHandler,
  toPi,
} from "./openclaw_convert.mjs";

const { modulesDir, input, outputPath } = runnerArguments();
const out = { ok: false, warnings: [], node: process.version };

try {
  const oc = await loadOpenClaw(modulesDir);
  out.import_ms = oc.importMs;
  out.versions = oc.versions;
  const { piCompaction, piSession, piMessages } = oc;

  const model = piModel(input);
  const piMsgs = toPi(input.messages, model);

  const settings = compactionSettings(oc, input);
  if (input.keep_recent_tokens) {
    settings.keepRecentTokens = input.keep_recent_tokens;
  } else if (input.keep_recent_messages) {
    // The nearest equivalent of "keep the last N messages": pi's own estimate of those N messages.
    settings.keepRecentTokens = piMsgs
      .slice(-input.keep_recent_messages)
      .reduce((sum, m) => sum + piCompaction.estimateTokens(m), 0);
  }
  out.settings = settings;

  // Capture what the extension logs (history-share pruning, summarization fallbacks).
  const origWarn = console.warn;
  console.warn = (...a) => {
    out.warnings.push(a.map(String).join(" "));
  };

  const sessionManager = piSession.SessionManager.inMemory(process.cwd());
  const entryIds = piMsgs.map((m) => sessionManager.appendMessage(m));
  const sessionBeforeCompact = safeguardHandler(oc, sessionManager);
  const ctx = {
    model,
    modelRegistry: { getApiKey: async () => input.api_key },
    sessionManager,
  };

  const start = performance.now();
  const pathEntries = sessionManager.getBranch();
  const preparation = piCompaction.prepareCompaction(pathEntries, settings);
  if (!preparation) {
    throw new Error("prepareCompaction returned nothing (session too small)");
  }
  const prepared = performance.now();
  const controller = new AbortController();
  const result = await sessionBeforeCompact(
    { type: "session_before_compact", preparation, branchEntries: pathEntries, customInstructions: undefined, signal: controller.signal },
    ctx,
  );
  const summarized = performance.now();
  const compaction = result.compaction;
  sessionManager.appendCompaction(compaction.summary, compaction.firstKeptEntryId, compaction.tokensBefore, compaction.details, true);
  const context = sessionManager.buildSessionContext();
  const llmMessages = piMessages.convertToLlm(context.messages);
  const payload = await requestPayload(oc, model, input, llmMessages);
  const end = performance.now();
  console.warn = origWarn;
  if (!payload) {
    throw new Error("pi-ai built no request payload");
  }

  out.ok = true;
  out.wall_ms = end - start;
  out.phases = { prepare_ms: prepared - start, summarize_ms: summarized - prepared, rebuild_ms: end - summarized };
  out.first_kept_index = entryIds.indexOf(compaction.firstKeptEntryId);
  out.messages_to_summarize = preparation.messagesToSummarize.length;
  out.turn_prefix_messages = preparation.turnPrefixMessages.length;
  out.is_split_turn = preparation.isSplitTurn;
  out.tokens_before_estimate = preparation.tokensBefore;
  out.summary_chars = compaction.summary.length;
  out.summary = compaction.summary;
  out.fallback_summary = compaction.summary.startsWith("Summary unavailable");
  out.context_messages = context.messages.length;
  out.payload = { messages: payload.messages, model: payload.model, max_completion_tokens: payload.max_completion_tokens };
} catch (error) {
  out.ok = false;
  out.error = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  out.stack = error instanceof Error ? error.stack : undefined;
}
writeFileSync(outputPath, JSON.stringify(out));
process.exit(0);

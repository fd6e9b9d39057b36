// OpenClaw's compaction in an agent loop (npm openclaw@2026.1.30 on @mariozechner/pi-coding-agent@0.50.7):
// the session is fed one message at a time, and before each model call (a message that is not the
// assistant's, followed by the assistant's) the context is compacted once it reaches `threshold` of
// the window by pi's own estimate (chars/4, `estimateTokens`), kept as a running sum of what was
// appended since the last compaction. Each compaction is what openclaw_runner.mjs runs once: pi's
// prepareCompaction -> the safeguard extension's `session_before_compact` handler (summarizer calls
// to the fake provider) -> appendCompaction + buildSessionContext -> convertToLlm and pi-ai's request
// builder (the wire messages, captured with `onPayload`, so nothing is sent).
//
//   node openclaw_incremental.mjs --modules DIR/node_modules --input in.json --output out.json
//
// Input: as openclaw_runner.mjs, plus `threshold` (share of context_window). keep_recent_messages
// becomes keepRecentTokens = pi's estimate of the last N messages at each compaction.
// Output: {ok, error, versions, import_ms, settings, compactions: [{at, cpu_ms, handler_cpu_ms, wall_ms,
//          estimate_before, estimate_after, messages_to_summarize, payload_messages}], warnings}.
// cpu_ms is process.cpuUsage() (user + system) over the whole compaction; handler_cpu_ms the part
// spent in the safeguard handler, which includes the HTTP exchanges with the fake provider.

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
const out = { ok: false, warnings: [], node: process.version, compactions: [] };

function cpuMs(since) {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1000;
}

try {
  const oc = await loadOpenClaw(modulesDir);
  out.import_ms = oc.importMs;
  out.versions = oc.versions;
  const { piCompaction, piSession, piMessages } = oc;

  const model = piModel(input);
  const piMsgs = toPi(input.messages, model);
  const settings = compactionSettings(oc, input);
  out.settings = { ...settings, threshold: input.threshold };
  const trigger = input.threshold * input.context_window;
  const systemEstimate = Math.ceil((input.system ?? "").length / 4);

  const origWarn = console.warn;
  console.warn = (...a) => {
    out.warnings.push(a.map(String).join(" "));
  };

  const sessionManager = piSession.SessionManager.inMemory(process.cwd());
  const sessionBeforeCompact = safeguardHandler(oc, sessionManager);
  const ctx = { model, modelRegistry: { getApiKey: async () => input.api_key }, sessionManager };

  let estimate = systemEstimate;
  for (let i = 0; i < piMsgs.length; i++) {
    sessionManager.appendMessage(piMsgs[i]);
    estimate += piCompaction.estimateTokens(piMsgs[i]);
    const next = i + 1 < input.messages.length ? input.messages[i + 1].role : "assistant";
    if (input.messages[i].role === "assistant" || next !== "assistant" || estimate < trigger) {
      continue;
    }
    // A model call comes next and the context reached the threshold: compact.
    const cpu0 = process.cpuUsage();
    const start = performance.now();
    if (input.keep_recent_messages) {
      settings.keepRecentTokens = piMsgs
        .slice(Math.max(0, i + 1 - input.keep_recent_messages), i + 1)
        .reduce((sum, m) => sum + piCompaction.estimateTokens(m), 0);
    }
    const branch = sessionManager.getBranch();
    const preparation = piCompaction.prepareCompaction(branch, settings);
    if (!preparation) {
      out.compactions.push({ at: i, skipped: "prepareCompaction returned nothing" });
      continue;
    }
    const cpuHandler = process.cpuUsage();
    const result = await sessionBeforeCompact(
      {
        type: "session_before_compact",
        preparation,
        branchEntries: branch,
        customInstructions: undefined,
        signal: new AbortController().signal,
      },
      ctx,
    );
    const handlerCpu = cpuMs(cpuHandler);
    if (!result || !result.compaction) {
      out.compactions.push({ at: i, skipped: "the safeguard handler returned no compaction", cpu_ms: cpuMs(cpu0) });
      continue;
    }
    const compaction = result.compaction;
    sessionManager.appendCompaction(compaction.summary, compaction.firstKeptEntryId, compaction.tokensBefore, compaction.details, true);
    const context = sessionManager.buildSessionContext();
    const llmMessages = piMessages.convertToLlm(context.messages);
    const payload = await requestPayload(oc, model, input, llmMessages);
    const cpu = cpuMs(cpu0);
    const wall = performance.now() - start;
    if (!payload) {
      throw new Error(`pi-ai built no request payload after the compaction at message ${i}`);
    }
    const before = estimate;
    estimate = systemEstimate + context.messages.reduce((sum, m) => sum + piCompaction.estimateTokens(m), 0);
    out.compactions.push({
      at: i,
      cpu_ms: cpu,
      handler_cpu_ms: handlerCpu,
      wall_ms: wall,
      estimate_before: before,
      estimate_after: estimate,
      messages_to_summarize: preparation.messagesToSummarize.length,
      payload_messages: payload.messages,
    });
  }
  console.warn = origWarn;
  out.ok = true;
} catch (error) {
  out.ok = false;
  out.error = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  out.stack = error instanceof Error ? error.stack : undefined;
}
writeFileSync(outputPath, JSON.stringify(out));
process.exit(0);

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

import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

import { toPi } from "./openclaw_convert.mjs";

function arg(name) {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0 || i + 1 >= process.argv.length) {
    throw new Error(`missing --${name}`);
  }
  return process.argv[i + 1];
}

const modulesDir = path.resolve(arg("modules"));
const input = JSON.parse(readFileSync(arg("input"), "utf8"));
const outputPath = arg("output");
const out = { ok: false, warnings: [], node: process.version, compactions: [] };

function mod(rel) {
  return import(pathToFileURL(path.join(modulesDir, rel)).href);
}

function cpuMs(since) {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1000;
}

try {
  const t0 = performance.now();
  const piCompaction = await mod("@mariozechner/pi-coding-agent/dist/core/compaction/compaction.js");
  const piSession = await mod("@mariozechner/pi-coding-agent/dist/core/session-manager.js");
  const piMessages = await mod("@mariozechner/pi-coding-agent/dist/core/messages.js");
  const piAi = await mod("@mariozechner/pi-ai/dist/index.js");
  const safeguard = await mod("openclaw/dist/agents/pi-extensions/compaction-safeguard.js");
  const safeguardRuntime = await mod("openclaw/dist/agents/pi-extensions/compaction-safeguard-runtime.js");
  const piSettings = await mod("openclaw/dist/agents/pi-settings.js");
  out.import_ms = performance.now() - t0;
  out.versions = {
    openclaw: JSON.parse(readFileSync(path.join(modulesDir, "openclaw/package.json"), "utf8")).version,
    "pi-coding-agent": JSON.parse(readFileSync(path.join(modulesDir, "@mariozechner/pi-coding-agent/package.json"), "utf8")).version,
    "pi-ai": JSON.parse(readFileSync(path.join(modulesDir, "@mariozechner/pi-ai/package.json"), "utf8")).version,
  };

  const model = {
    id: input.model,
    name: input.model,
    api: "openai-completions",
    provider: "openai",
    baseUrl: input.base_url,
    reasoning: false,
    input: ["text", "image"],
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
    contextWindow: input.context_window,
    maxTokens: input.max_output_tokens,
  };
  const piMsgs = toPi(input.messages, model);
  const settings = { ...piCompaction.DEFAULT_COMPACTION_SETTINGS };
  settings.reserveTokens = Math.max(settings.reserveTokens, piSettings.DEFAULT_PI_COMPACTION_RESERVE_TOKENS_FLOOR);
  if (input.reserve_tokens) {
    settings.reserveTokens = input.reserve_tokens;
  }
  out.settings = { ...settings, threshold: input.threshold };
  const trigger = input.threshold * input.context_window;
  const systemEstimate = Math.ceil((input.system ?? "").length / 4);

  const origWarn = console.warn;
  console.warn = (...a) => {
    out.warnings.push(a.map(String).join(" "));
  };

  const sessionManager = piSession.SessionManager.inMemory(process.cwd());
  safeguardRuntime.setCompactionSafeguardRuntime(sessionManager, { maxHistoryShare: undefined });
  const handlers = {};
  safeguard.default({
    on(event, fn) {
      handlers[event] = fn;
    },
  });
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
    const result = await handlers.session_before_compact(
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
    let payload = null;
    const stream = piAi.streamSimple(
      model,
      { systemPrompt: input.system ?? undefined, messages: llmMessages },
      {
        apiKey: input.api_key,
        onPayload(p) {
          payload = p;
          throw new Error("payload captured; not sent");
        },
      },
    );
    await stream.result();
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

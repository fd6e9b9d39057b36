// The shared part of the OpenClaw runners (openclaw_runner.mjs, openclaw_incremental.mjs): their
// command line, OpenClaw's and pi's modules loaded from the given node_modules (with their versions),
// the pi model pointed at the fake provider, pi's compaction settings as OpenClaw sets them, the
// safeguard extension's handler, the request payload pi-ai would send, and the benchmark's OpenAI chat
// messages as pi AgentMessages. Imports nothing of OpenClaw or pi itself: `loadOpenClaw` does, from
// the directory it is given.

import { readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

// `--modules DIR --input FILE --output FILE`: the modules directory, the parsed input, the output path.
export function runnerArguments(argv = process.argv) {
  const arg = (name) => {
    const i = argv.indexOf(`--${name}`);
    if (i < 0 || i + 1 >= argv.length) {
      throw new Error(`missing --${name}`);
    }
    return argv[i + 1];
  };
  return {
    modulesDir: path.resolve(arg("modules")),
    input: JSON.parse(readFileSync(arg("input"), "utf8")),
    outputPath: arg("output"),
  };
}

// pi's compaction, session manager, message conversion and pi-ai, and OpenClaw's safeguard extension and
// settings, imported from `modulesDir`; `importMs` is how long the imports took.
export async function loadOpenClaw(modulesDir) {
  const mod = (rel) => import(pathToFileURL(path.join(modulesDir, rel)).href);
  const version = (pkg) => JSON.parse(readFileSync(path.join(modulesDir, pkg, "package.json"), "utf8")).version;
  const t0 = performance.now();
  const modules = {
    piCompaction: await mod("@mariozechner/pi-coding-agent/dist/core/compaction/compaction.js"),
    piSession: await mod("@mariozechner/pi-coding-agent/dist/core/session-manager.js"),
    piMessages: await mod("@mariozechner/pi-coding-agent/dist/core/messages.js"),
    piAi: await mod("@mariozechner/pi-ai/dist/index.js"),
    safeguard: await mod("openclaw/dist/agents/pi-extensions/compaction-safeguard.js"),
    safeguardRuntime: await mod("openclaw/dist/agents/pi-extensions/compaction-safeguard-runtime.js"),
    piSettings: await mod("openclaw/dist/agents/pi-settings.js"),
  };
  const importMs = performance.now() - t0;
  const versions = {
    openclaw: version("openclaw"),
    "pi-coding-agent": version("@mariozechner/pi-coding-agent"),
    "pi-ai": version("@mariozechner/pi-ai"),
  };
  return { ...modules, importMs, versions };
}

// pi-ai's "openai-completions" model at the input's base URL (the fake provider).
export function piModel(input) {
  return {
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
}

// pi's compaction settings as OpenClaw sets them: pi defaults, reserve raised to OpenClaw's floor
// (20,000), or the input's reserve_tokens when it gives one.
export function compactionSettings(oc, input) {
  const settings = { ...oc.piCompaction.DEFAULT_COMPACTION_SETTINGS };
  settings.reserveTokens = Math.max(settings.reserveTokens, oc.piSettings.DEFAULT_PI_COMPACTION_RESERVE_TOKENS_FLOOR);
  if (input.reserve_tokens) {
    settings.reserveTokens = input.reserve_tokens;
  }
  return settings;
}

// The safeguard extension's `session_before_compact` handler for `sessionManager`, registered as
// OpenClaw's embedded runner does (its runtime with maxHistoryShare unset -> 0.5).
export function safeguardHandler(oc, sessionManager) {
  oc.safeguardRuntime.setCompactionSafeguardRuntime(sessionManager, { maxHistoryShare: undefined });
  const handlers = {};
  oc.safeguard.default({
    on(event, fn) {
      handlers[event] = fn;
    },
  });
  return handlers.session_before_compact;
}

// The request body pi-ai builds for `messages` (captured with `onPayload`, so nothing is sent), or
// null when it built none.
export async function requestPayload(oc, model, input, messages) {
  let payload = null;
  const stream = oc.piAi.streamSimple(
    model,
    { systemPrompt: input.system ?? undefined, messages },
    {
      apiKey: input.api_key,
      onPayload(p) {
        payload = p;
        throw new Error("payload captured; not sent");
      },
    },
  );
  await stream.result();
  return payload;
}

// OpenAI chat dicts -> pi AgentMessages (user / assistant with toolCall blocks / toolResult).
export function toPi(messages, model) {
  const toolNames = new Map();
  const now = Date.now();
  const result = [];
  for (const m of messages) {
    if (m.role === "user") {
      let content;
      if (typeof m.content === "string") {
        content = m.content;
      } else {
        content = [];
        for (const block of m.content ?? []) {
          if (block.type === "text") {
            content.push({ type: "text", text: block.text });
          } else if (block.type === "image_url") {
            const url = block.image_url?.url ?? "";
            const match = /^data:([^;]+);base64,(.*)$/s.exec(url);
            if (match) {
              content.push({ type: "image", mimeType: match[1], data: match[2] });
            }
          }
        }
      }
      result.push({ role: "user", content, timestamp: now });
    } else if (m.role === "assistant") {
      const content = [];
      const text = typeof m.content === "string" ? m.content : (m.content ?? []).map((b) => b.text ?? "").join("");
      if (text) {
        content.push({ type: "text", text });
      }
      for (const call of m.tool_calls ?? []) {
        let args = {};
        try {
          args = JSON.parse(call.function.arguments || "{}");
        } catch {
          args = { raw: call.function.arguments };
        }
        toolNames.set(call.id, call.function.name);
        content.push({ type: "toolCall", id: call.id, name: call.function.name, arguments: args });
      }
      result.push({
        role: "assistant",
        content,
        api: model.api,
        provider: model.provider,
        model: model.id,
        // No `usage`: these messages were never answered by this model, so pi's tokensBefore falls back
        // to its chars/4 estimate of the whole session instead of a made-up provider count.
        stopReason: (m.tool_calls ?? []).length ? "toolUse" : "stop",
        timestamp: now,
      });
    } else if (m.role === "tool") {
      const text = typeof m.content === "string" ? m.content : (m.content ?? []).map((b) => b.text ?? "").join("\n");
      result.push({
        role: "toolResult",
        toolCallId: m.tool_call_id,
        toolName: toolNames.get(m.tool_call_id) ?? "unknown",
        content: [{ type: "text", text }],
        // OpenAI tool messages carry no error flag; the generator starts failed results this way.
        isError: text.startsWith("Error") || text.startsWith("Exit code"),
        timestamp: now,
      });
    } else {
      throw new Error(`unexpected role ${m.role} (the system prompt goes in "system")`);
    }
  }
  return result;
}

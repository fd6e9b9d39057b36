// The shared part of the OpenClaw runners (openclaw_runner.mjs, openclaw_incremental.mjs): the
// benchmark's OpenAI chat messages as pi AgentMessages. Imports nothing of OpenClaw or pi.

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

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from compaction.integrations.langchain import CompactionMiddleware

# A tool-heavy history (~23,000 tokens): 40 file reads.
history = [HumanMessage("Find every module that still reads RETRY_BUDGET (ticket OPS-4821).")]
for k in range(40):
    call = {"id": f"call_{k}", "name": "read_file", "args": {"path": f"src/module_{k}.py"}}
    history.append(AIMessage("", tool_calls=[call]))
    history.append(ToolMessage(f"src/module_{k}.py\n" + "retries = RETRY_BUDGET\n" * 60, tool_call_id=f"call_{k}"))

middleware = CompactionMiddleware("gpt-4o", trigger=("tokens", 8_000), keep=("messages", 6))
model = GenericFakeChatModel(messages=iter([AIMessage("module_3 and module_17 still read it.")]))  # offline stand-in
agent = create_agent(model, middleware=[middleware])
state = agent.invoke({"messages": history})

compaction = middleware.compactions()[0]
print(
    f"{len(history)} -> {len(state['messages'])} messages, "
    f"{compaction.result.tokens_before:,} -> {compaction.result.tokens_after:,} tokens"
)
print(len(middleware.removed()), "originals kept, e.g. the result of", middleware.removed()[1].tool_call_id)
print(middleware.recall_tool().invoke({"query": "src/module_3.py"}).splitlines()[0])

"""Terminal output relayed as a user turn by agent frameworks that send observations that way."""

from __future__ import annotations

import re

from compaction.transcript import Message

# A bare shell prompt on a line of its own: "$", "bash-$", "sh-5.1#", "user@host:~/repo$", ">>>".
_PROMPT_LINE = re.compile(r"^(?:\([\w.-]+\)\s+)?(?:[\w.-]+@[\w.-]+:\S*|[a-z]+(?:-[\d.]+)?-?)?[$#%]$|^>>>$")


def _ends_at_prompt(text: str) -> bool:
    """Does the text end with a bare shell prompt line (a terminal capture waiting for input)?"""
    last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")
    return _PROMPT_LINE.match(last) is not None


def _issued_a_command(message: Message | None) -> bool:
    """Did this assistant turn end by issuing a command: its text ends with a code block?"""
    if message is None or message.role != "assistant" or message.has_tool_calls:
        return False
    text = message.text.rstrip()
    return text.endswith(("```", "~~~")) and text.count(text[-3:]) >= 2


def relays_terminal(message: Message, previous: Message | None) -> bool:
    """Is this user turn a command's output relayed by the agent framework? Frameworks that send
    observations as user messages (SWE-agent, ReAct loops) answer an assistant turn that ended with
    a command in a code block by the terminal's output, ending at the shell prompt. Both signs
    together: a task the user wrote may end at a prompt too (SWE-agent appends one to the issue),
    but it does not answer a command.

    >>> from compaction.transcript import Message, TextPart
    >>> act = Message(role="assistant", parts=(TextPart(text="Let's look.\\n```\\nfile release\\n```"),), id="a")
    >>> out = Message(role="user", parts=(TextPart(text="release: ELF 64-bit LSB executable\\nbash-$"),), id="u")
    >>> relays_terminal(out, act), relays_terminal(out, None)
    (True, False)
    """
    return _issued_a_command(previous) and _ends_at_prompt(message.text)

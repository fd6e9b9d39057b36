"""Files a command or a patch changes: diff headers, shell commands that write, aider SEARCH/REPLACE
blocks and SWE-agent's editor commands.
"""

from __future__ import annotations

import re
import shlex

from compaction._cache import memoize_text
from compaction.patterns.references import dedupe

# A unified or git diff's headers ("diff --git a/x b/x", "+++ b/x", "--- a/x" of a deleted file) and
# the file headers of the apply_patch format ("*** Update File: x").
_DIFF_GIT = re.compile(r"^diff --git (?:\"?a/)?(\S+?)\"? (?:\"?b/)?(\S+?)\"?$", re.MULTILINE)


_DIFF_PLUS = re.compile(r"^\+\+\+ (?:b/)?([^\t\n]+?)(?:\t.*)?$", re.MULTILINE)


_DIFF_MINUS = re.compile(r"^--- (?:a/)?([^\t\n]+?)(?:\t.*)?\n\+\+\+ /dev/null$", re.MULTILINE)


_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (\S.*?)\s*$", re.MULTILINE)


_MOVE_TO = re.compile(r"^\*\*\* Move to: (\S.*?)\s*$", re.MULTILINE)


_NOT_A_FILE = ("/dev/", "-")


def _file_operand(word: str) -> bool:
    """A command word that names one file: not an option, a variable, a glob or a device."""
    return bool(word) and not (
        word.startswith(_NOT_A_FILE) or "$" in word or any(c in word for c in "*?[]{}`\n=") or word in (".", "..")
    )


def diff_paths(text: str) -> list[str]:
    """The files a diff or patch in ``text`` changes, from its headers, in order, each once.

    >>> diff_paths("diff --git a/src/x.py b/src/x.py\\n--- a/src/x.py\\n+++ b/src/x.py\\n@@ -1 +1 @@")
    ['src/x.py']
    >>> diff_paths("--- a/old.txt\\n+++ /dev/null\\n*** Update File: lib/y.ts")
    ['old.txt', 'lib/y.ts']
    """
    if "--- " not in text and "diff --git" not in text and "*** " not in text:
        return []
    found: list[tuple[int, str]] = []
    for m in _DIFF_GIT.finditer(text):
        found += [(m.start(), m.group(1)), (m.start(), m.group(2))]
    for pattern in (_DIFF_PLUS, _DIFF_MINUS, _PATCH_FILE, _MOVE_TO):
        found += [(m.start(), m.group(1).strip()) for m in pattern.finditer(text)]
    return dedupe([path for _, path in sorted(found) if _file_operand(path)])


_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_]\w*)\1")


_CONTROL = frozenset({";", "&&", "||", "|", "&", "|&", "(", ")", "\n"})


_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>"})


# Programs whose file operands (the ones the lambdas pick) they change.
_LAST_OPERAND = frozenset({"mv", "cp", "install", "ln", "rsync"})


_EVERY_OPERAND = frozenset({"tee", "touch", "rm", "truncate", "shred", "unlink"})


_IN_PLACE = frozenset({"sed", "perl", "gsed"})


_WRAPPERS = frozenset({"sudo", "command", "exec", "nohup", "time", "env", "xargs"})


# File editors of agent tool bundles, run as shell commands ("str_replace_editor create PATH"), and
# the sub-commands of theirs that change the file they name ("view" only reads it).
_EDITOR_TOOLS = frozenset({"str_replace_editor", "file_editor", "edit_tool"})


EDITOR_WRITE_COMMANDS = frozenset({"create", "str_replace", "insert", "undo_edit", "write", "append", "edit"})


_PATCH_PROGRAMS = frozenset({"apply_patch", "applypatch"})


def _heredocs(command: str) -> tuple[str, list[str]]:
    """``command`` without its here-document bodies, and the bodies."""
    bodies: list[str] = []
    lines = command.split("\n")
    kept: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        kept.append(line)
        i += 1
        for m in _HEREDOC.finditer(line):
            body: list[str] = []
            while i < len(lines) and lines[i].strip() != m.group(2):
                body.append(lines[i])
                i += 1
            i += 1  # the delimiter line
            bodies.append("\n".join(body))
    return "\n".join(kept), bodies


def _words_of(command: str) -> list[str]:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace = " \t\r"  # a newline separates commands
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:  # an unbalanced quote: read no targets rather than guess them
        return []


def _written_by(words: list[str]) -> list[str]:
    """The files one simple command (its words, redirections removed) changes."""
    while words and (words[0] in _WRAPPERS or "=" in words[0].split("/", 1)[0]):
        words = words[1:]  # "sudo", "env X=1", "FOO=bar cmd"
    if not words:
        return []
    program = words[0].rsplit("/", 1)[-1]
    rest = words[1:]
    operands = [w for w in rest if not w.startswith("-")]
    if program in _EVERY_OPERAND:
        return [w for w in operands if _file_operand(w)]
    if program in _LAST_OPERAND:
        if "-t" in rest and rest.index("-t") + 1 < len(rest):
            return [rest[rest.index("-t") + 1]]
        return operands[-1:] if len(operands) >= 2 and _file_operand(operands[-1]) else []
    if program in _IN_PLACE and any(w.startswith("-i") or (w.startswith("-") and "i" in w[1:3]) for w in rest):
        # The script is the first operand unless given with -e/-f (whose arguments are not files).
        scripted = False
        files: list[str] = []
        skip = False
        for w in rest:
            if skip:
                skip = False
                continue
            if w in ("-e", "-f", "--expression", "--file"):
                scripted, skip = True, True
                continue
            if w.startswith("-"):
                continue
            if not scripted:
                scripted = True
                continue
            files.append(w)
        return [w for w in files if _file_operand(w)]
    if program in _EDITOR_TOOLS and len(operands) >= 2 and operands[0] in EDITOR_WRITE_COMMANDS:
        return [operands[1]] if _file_operand(operands[1]) else []  # "str_replace_editor str_replace PATH ..."
    if program == "create" and operands:
        return operands[:1] if _file_operand(operands[0]) else []  # SWE-agent's "create FILE"
    if program in _PATCH_PROGRAMS:
        return [path for w in rest if "\n" in w for path in diff_paths(w)]  # the patch given as an argument
    if program == "git" and operands[:1] in (["rm"], ["mv"], ["restore"], ["checkout"]):
        paths = rest[rest.index("--") + 1 :] if "--" in rest else operands[1:]
        if operands[0] == "mv":
            paths = paths[-1:]
        elif operands[0] == "checkout" and "--" not in rest:
            return []  # "git checkout branch": no file named
        return [w for w in paths if _file_operand(w)]
    return []


def shell_written_paths(command: str) -> list[str]:
    """The files a shell command changes, in order, each once: redirection targets (``>``,
    ``>>``), ``tee``, ``touch`` and ``rm`` operands, the destination of ``mv``/``cp``, the files of
    ``sed -i``/``perl -i`` (not the script), ``git rm``/``mv``/``restore``/``checkout --``, and the
    files a patch given in a here-document changes (``git apply``, ``patch``). Module names, the
    arguments of other programs and text inside quotes are never targets.

    >>> shell_written_paths("cd /repo && sed -i 's/134s/x/' src/a.py && python -c 'import django.db' > out.txt 2>&1")
    ['src/a.py', 'out.txt']
    >>> shell_written_paths("cat src/b.py | grep x; cp a.cfg backup/a.cfg; echo ok >> log.txt")
    ['backup/a.cfg', 'log.txt']
    """
    return list(_shell_written_paths(command))


@memoize_text  # an agent's command is met again in every compaction that reads its call
def _shell_written_paths(command: str) -> tuple[str, ...]:
    head, bodies = _heredocs(command)
    words = _words_of(head)
    out: list[str] = []
    simple: list[str] = []
    k = 0
    while k <= len(words):
        word = words[k] if k < len(words) else "\n"
        if word in _CONTROL:
            out += _written_by(simple)
            simple = []
        elif word in _REDIRECTS:
            if k + 1 < len(words) and _file_operand(words[k + 1]):
                out.append(words[k + 1])
            k += 1  # the target is no operand of the command
        elif word in ("<", "<<", "<<<", ">&", "<&", "<<-"):
            k += 1  # an input, a here-document delimiter, a file descriptor
        elif not (word.isdigit() and k + 1 < len(words) and words[k + 1] in _REDIRECTS | {">&"}):
            simple.append(word)  # "2" of "2>err.log" is no operand
        k += 1
    if bodies and re.search(r"\b(?:git\s+apply|patch|apply_patch)\b", head):
        for body in bodies:
            out += diff_paths(body)
    return tuple(dedupe(out))


# Edits written as text: an aider SEARCH/REPLACE block names its file on the line before the block
# (before its code fence, when fenced); SWE-agent's editor commands change the file last opened.
_SEARCH_MARK = re.compile(r"^\s*<{5,9} SEARCH\s*$")


_FENCE_OPEN = re.compile(r"^\s*(`{3,}|~{3,})")


_FILE_NAME_LINE = re.compile(r"^[\w.@+~/\\-]+$")


_NAME_DECORATION = "`*#: \t"


def search_replace_paths(text: str) -> list[str]:
    """The files the SEARCH/REPLACE edit blocks of ``text`` change (aider's edit format), in order,
    each once: the file name is the line just before the block's code fence, or just before
    ``<<<<<<< SEARCH`` when the block is not fenced; a block with no name line edits the file of
    the block before it.

    >>> block = "<<<<<<< SEARCH\\nx = 1\\n=======\\nx = 2\\n>>>>>>> REPLACE"
    >>> search_replace_paths("Change it:\\n\\nsrc/app.py\\n```python\\n" + block + "\\n```")
    ['src/app.py']
    >>> search_replace_paths("<<<<<<< SEARCH\\nno name line\\n=======\\n>>>>>>> REPLACE")
    []
    """
    if "SEARCH" not in text:
        return []
    lines = text.splitlines()
    out: list[str] = []
    last: str | None = None
    for i, line in enumerate(lines):
        if not _SEARCH_MARK.match(line):
            continue
        j = i - 1
        if j >= 0 and _FENCE_OPEN.match(lines[j]):
            j -= 1
        name = lines[j].strip().strip(_NAME_DECORATION) if j >= 0 else ""
        if name and _FILE_NAME_LINE.match(name) and _file_operand(name) and not _FENCE_OPEN.match(lines[j]):
            last = name
        if last is not None:
            out.append(last)
    return dedupe(out)


_FENCED = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.MULTILINE | re.DOTALL)


def final_code_block(text: str) -> str | None:
    """The body of the fenced code block ``text`` ends with (how an agent without tool calls, such
    as SWE-agent's text mode, issues its command), or ``None`` when it ends otherwise.

    >>> final_code_block("Let's open it.\\n```\\nopen src/a.py 40\\n```\\n")
    'open src/a.py 40\\n'
    """
    stripped = text.rstrip()
    if not stripped.endswith(("```", "~~~")):
        return None
    blocks = list(_FENCED.finditer(stripped))
    return blocks[-1].group(2) if blocks and blocks[-1].end() >= len(stripped) else None


_OPEN_LINE = re.compile(r"^open\s+(?P<q>[\"']?)(?P<path>[^\s\"']+)(?P=q)(?:\s+-?\d+)?$")


_CREATE_LINE = re.compile(r"^create\s+(?P<q>[\"']?)(?P<path>[^\s\"']+)(?P=q)$")


_EDIT_OPEN_FILE = re.compile(r"^(?P<verb>edit|insert|append)\b(?P<rest>.*)$")


_BODY_END = re.compile(r"^end_of_(?:edit|insert|append)\s*$")


_OPEN_TOOLS = frozenset({"open", "open_file"})


_CURRENT_FILE_TOOLS = frozenset({"edit", "insert", "append"})


_FILE_KEYS = ("path", "file_path", "filename", "file", "file_name")


class OpenFile:
    """The file an agent's editor has open, for the edit commands that change it without naming
    it: SWE-agent's ``open PATH`` and ``create PATH`` choose the file (as commands in a shell or a
    text action, or as tools), and its ``edit N:M``, ``insert N`` and ``append`` commands (and the
    ``edit``/``insert`` tools called with no path) change that file. One instance follows one
    transcript in order.

    >>> editor = OpenFile()
    >>> editor.command("open src/a.py 40"), editor.command("edit 41:42\\n    return x > 0\\nend_of_edit")
    ([], ['src/a.py'])
    >>> editor.command("create t.py\\nrm old.txt")
    ['t.py', 'old.txt']
    >>> editor.command("cat > notes.py <<'EOF'\\nedit\\nEOF")  # a here-document's "edit" is text
    ['notes.py']
    """

    def __init__(self) -> None:
        self.path: str | None = None

    def command(self, command: str) -> list[str]:
        """The files a command changes (:func:`shell_written_paths`, with the editor's commands
        and their bodies read first), remembering the file it opens or creates."""
        out: list[str] = []
        shell: list[str] = []
        lines = command.split("\n")
        i = 0
        while i < len(lines):
            line = lines[i].strip()
            i += 1
            delimiters = [m.group(2) for m in _HEREDOC.finditer(line)]
            if delimiters:  # a here-document's lines are text, not commands: passed on as they are
                shell.append(lines[i - 1])
                for delimiter in delimiters:
                    while i < len(lines):
                        shell.append(lines[i])
                        i += 1
                        if lines[i - 1].strip() == delimiter:
                            break
                continue
            opened = _OPEN_LINE.match(line) or _CREATE_LINE.match(line)
            if opened is not None:
                self.path = opened.group("path")
            edit = _EDIT_OPEN_FILE.match(line)
            if edit is not None and not _SHELL_ARGUMENT.match(edit.group("rest")):
                if self.path is not None:
                    out.append(self.path)
                end = next((k for k in range(i, len(lines)) if _BODY_END.match(lines[k].strip())), None)
                if end is not None:
                    i = end + 1  # the new text up to its end marker: no command of its own
                continue
            shell.append(lines[i - 1])
        return dedupe(out + shell_written_paths("\n".join(shell)))

    def call(self, name: str, args: object) -> list[str]:
        """The files a tool call of the editor changes without naming them: an ``edit``/``insert``
        /``append`` tool given no path changes the open file; ``open``/``create`` choose it."""
        if not isinstance(args, dict):
            return []
        named = next((v.strip() for k in _FILE_KEYS if isinstance(v := args.get(k), str) and v.strip()), None)
        tool = name.lower()
        if tool in _OPEN_TOOLS | {"create"} and named is not None:
            self.path = named
        if tool in _CURRENT_FILE_TOOLS and named is None and self.path is not None:
            return [self.path]
        return []


# What follows "edit"/"insert" in a shell command that is no SWE-agent editor command: an option or
# a file name ("edit -w file", "insert x.txt"), not a line range or number.
_SHELL_ARGUMENT = re.compile(r"^\s+(?!\d+(?::\d+)?\s*$)(?!['\"])\S")

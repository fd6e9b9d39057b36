"""What matters in text: paths, URLs, identifiers and error lines, found fast and in order.

Pruning keeps these lines when it cuts the middle of a tool result, and the artifact ledger lists
them, because summaries lose them first (file paths, commands and ids are what every compactor drops).
All regexes are linear-time on megabytes of log text: no nested quantifiers over the same
characters, and token starts are pinned by a look-behind so long tokens are scanned once.

>>> find_paths("edited src/app/main.py and ./run.sh, see https://x.io/a/b.py")
['src/app/main.py', './run.sh']
>>> find_identifiers("fixed PAY-1432 in commit 3f9a2c1, issue #88")
['PAY-1432', '3f9a2c1', '#88']
"""

from __future__ import annotations

from compaction.patterns.changed_files import (
    EDITOR_WRITE_COMMANDS,
    OpenFile,
    diff_paths,
    final_code_block,
    search_replace_paths,
    shell_written_paths,
)
from compaction.patterns.cutting import (
    ELLIPSIS,
    TOKEN_END,
    ends_in_reference,
    head_cut,
    reference_safe_end,
    tail_cut,
    truncate,
)
from compaction.patterns.harness import carries_a_summary as carries_a_summary
from compaction.patterns.harness import is_harness_notice as is_harness_notice
from compaction.patterns.harness import users_words as users_words
from compaction.patterns.important import error_start, find_error_lines, important_lines, is_important_line
from compaction.patterns.important import important_and_error_lines as important_and_error_lines
from compaction.patterns.measurements import MAX_MEASUREMENT_LINE as MAX_MEASUREMENT_LINE
from compaction.patterns.measurements import QUANTITY as QUANTITY
from compaction.patterns.measurements import measurement as measurement
from compaction.patterns.measurements import measurement_lines as measurement_lines
from compaction.patterns.measurements import reports_quantity as reports_quantity
from compaction.patterns.references import find_identifiers, find_paths, find_references, find_urls, reference_spans
from compaction.patterns.terminal import relays_terminal as relays_terminal

__all__ = [
    "EDITOR_WRITE_COMMANDS",
    "ELLIPSIS",
    "TOKEN_END",
    "OpenFile",
    "diff_paths",
    "ends_in_reference",
    "error_start",
    "final_code_block",
    "find_error_lines",
    "find_identifiers",
    "find_paths",
    "find_references",
    "find_urls",
    "head_cut",
    "important_lines",
    "is_important_line",
    "reference_safe_end",
    "reference_spans",
    "search_replace_paths",
    "shell_written_paths",
    "tail_cut",
    "truncate",
]

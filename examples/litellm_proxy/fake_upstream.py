"""A fake OpenAI-compatible upstream on 127.0.0.1:8001 with a 6,000-token window, for trying the
proxy offline: requests over the window get OpenAI's ``context_length_exceeded`` error."""

import time

from compaction.testing import FakeProvider

if __name__ == "__main__":
    with FakeProvider(port=8001, context_window=6_000) as server:
        print(f"fake upstream at {server.openai_api_base} (Ctrl-C to stop)")
        while True:
            time.sleep(3600)

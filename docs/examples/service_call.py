"""One call to a running `compaction serve`: POST /v1/compact with the bundled coding session.

Usage: python docs/examples/service_call.py [BASE_URL]   (default http://127.0.0.1:8080)
Only the standard library: any language's HTTP client does the same.
"""

import json
import sys
import urllib.request

from compaction.demo import load_example

base_url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080"
messages, _ = load_example("coding_session")
body = {"messages": messages, "model": "gpt-4o", "options": {"window": 32_000}}
request = urllib.request.Request(
    f"{base_url}/v1/compact",
    data=json.dumps(body).encode(),
    headers={"content-type": "application/json"},  # and "Authorization: Bearer <key>" when keys are set
)
with urllib.request.urlopen(request, timeout=120) as response:
    answer = json.load(response)
print(answer["compacted"], answer["tokens_before"], "->", answer["tokens_after"], answer["fallback_level"])
print(len(answer["messages"]), "messages to send next")

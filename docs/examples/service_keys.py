from fastapi.testclient import TestClient

from compaction.server import create_app
from compaction.server.auth import KeyRing

keys = KeyRing.parse("team-a-secret-0123456789,team-b-secret-0123456789")
app = create_app(store_path=":memory:", api_keys=keys, rate_limit=5, rate_burst=10)
team_a = {"Authorization": "Bearer team-a-secret-0123456789"}
team_b = {"X-API-Key": "team-b-secret-0123456789"}
with TestClient(app) as client:
    assert client.post("/v1/sessions", json={"session_id": "demo"}).status_code == 401
    assert client.post("/v1/sessions", json={"session_id": "demo"}, headers=team_a).status_code == 201
    # the same id under another key is that key's own (here: not yet created) session
    assert client.get("/v1/sessions/demo/context", headers=team_b).status_code == 404
    refused = client.post("/v1/compact", json={"messages": [], "options": {"redact_secrets": False}}, headers=team_a)
    print(refused.status_code, refused.json()["error"]["message"])

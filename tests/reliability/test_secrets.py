"""Secrets that used to slip past redaction (issue 19, item 1), and the record redacted by default.

Every credential below is generated at run time (no literal secret sits in the source). Each one
is checked three ways: :func:`redact_if_needed` removes it on its own (and leaves its non-secret
context: user names, hosts, commands), it never reaches the summarizer (the requests the fake
provider received) nor the summary, the compacted messages or ``result.record``; and ordinary
command lines that look a little like them are left alone.
"""

from __future__ import annotations

import base64
import json
import random
import string
from typing import Any

import pytest
from reliability_kit import MODEL, assert_no_loss, config, llm, session

from compaction import Compactor, replay
from compaction.redact import redact_if_needed, redact_secrets
from compaction.testing import FakeProvider

ALNUM = string.ascii_letters + string.digits


def credentials(seed: int = 19) -> dict[str, str]:
    rng = random.Random(seed)

    def draw(n: int, alphabet: str = ALNUM) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    return {
        "json_url_pw": draw(14) + "4",
        "json2_url_pw": draw(15) + "2",
        "curl_pw": draw(12) + "7",
        "curl_user_pw": draw(13) + "1",
        # user:password with a letters-only password: its base64 may have no digit.
        "basic": base64.b64encode(("deploy:" + draw(16, string.ascii_letters)).encode()).decode(),
        "mysql_pw": draw(11) + "5",
        "mysqldump_pw": draw(12) + "8",
        "docker_pw": draw(20) + "3",
        "netrc_pw": draw(14) + "6",
        "spaced_pw_word": draw(10, string.ascii_lowercase) + "9",
        "slack_webhook": draw(24),
        "hf": "hf_" + draw(34, string.ascii_letters),
        "gitlab": "glpat-" + draw(20, ALNUM + "_-"),
        "npm": "npm_" + draw(36),
        "s3_signature": draw(64, "0123456789abcdef"),
        "s3_session_token": "IQoJb3JpZ2luX2Vj" + draw(120, ALNUM + "/+"),
        "stripe": "sk_" + "live_" + draw(24),
        "google": "AIza" + draw(35, ALNUM + "_-"),
        "azure_key": draw(86, ALNUM + "+/") + "==",
        "azure_sas_sig": draw(43, ALNUM) + "%3D",
    }


def leaky_texts(s: dict[str, str]) -> dict[str, str]:
    """Tool output and commands as agents see them. Some are JSON-escaped (a JSON string inside
    JSON: ``\\n`` and ``\\/`` escapes, quoted keys), the way API responses and logs print them."""
    spaced = f"tangerine {s['spaced_pw_word']} lantern"
    presigned = (
        "https://artifacts.s3.amazonaws.com/builds/app-1.4.2.tar.gz?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        "&X-Amz-Credential=ASIAXYZ4EXAMPLE7QRST%2F20251103%2Fus-east-1%2Fs3%2Faws4_request"
        f"&X-Amz-Date=20251103T101500Z&X-Amz-Expires=3600&X-Amz-Security-Token={s['s3_session_token']}"
        f"&X-Amz-SignedHeaders=host&X-Amz-Signature={s['s3_signature']}"
    )
    azure = (
        "DefaultEndpointsProtocol=https;AccountName=buildcache;"
        f"AccountKey={s['azure_key']};EndpointSuffix=core.windows.net"
    )
    sas = (
        "BlobEndpoint=https://buildcache.blob.core.windows.net/;SharedAccessSignature=sv=2022-11-02&ss=b"
        f"&srt=sco&sp=rl&se=2025-12-01T00:00:00Z&sig={s['azure_sas_sig']}"
    )
    return {
        "json_url": '{"DATABASE_URL": "postgres:\\/\\/admin:' + s["json_url_pw"] + '@db.internal:5432\\/app"}',
        "json_in_json_url": json.dumps(
            {"body": json.dumps({"remote": f"https://deploy:{s['json2_url_pw']}@git.example.com/org/app.git"})}
        ),
        "curl_u": f"$ curl -u admin:{s['curl_pw']} https://api.example.com/v1/status",
        "curl_user": f"$ curl --user 'ci-bot:{s['curl_user_pw']}' -X POST https://ci.example.com/job",
        "basic_header": f"> GET /v1/me HTTP/1.1\n> Authorization: Basic {s['basic']}\n< HTTP/1.1 200 OK",
        "mysql": f"$ mysql -h db.internal -u root -p{s['mysql_pw']} app < schema.sql",
        "mysqldump": f"$ mysqldump -uroot -p'{s['mysqldump_pw']}' --all-databases > dump.sql",
        "docker_login": f"$ docker login -u deploy-bot -p {s['docker_pw']} registry.example.com\nLogin Succeeded",
        "netrc": f"$ cat ~/.netrc\nmachine api.example.com login deploy-bot password {s['netrc_pw']}",
        "spaced": f'settings.py:12: DB_PASSWORD = "{spaced}"\nconfig.yml: password: "{spaced}"',
        "slack_webhook": f"POST https://hooks.slack.com/services/T04ABCD12/B05EFGH34/{s['slack_webhook']} -> 200",
        "hf": f"logged in with {s['hf']} (fine-grained, read)",
        "gitlab": f"remote: using {s['gitlab']} for the push",
        "npm": f"npm notice using {s['npm']} from the environment",
        "presigned": f"download: {presigned}",
        "stripe_json": json.dumps({"log": f"loaded keys:\n{s['stripe']}\n{s['google']}\ndone"}),
        "azure": f"AZURE_STORAGE_CONNECTION_STRING={azure}\n{json.dumps({'cs': sas})}",
    }


# Non-secret context each text keeps after redaction (users, hosts, commands).
CONTEXT_KEPT = {
    "json_url": "db.internal:5432",
    "curl_u": "curl -u admin:",
    "curl_user": "ci.example.com/job",
    "mysql": "mysql -h db.internal -u root -p",
    "docker_login": "docker login -u deploy-bot -p ",
    "netrc": "machine api.example.com login deploy-bot password ",
    "presigned": "https://artifacts.s3.amazonaws.com/builds/app-1.4.2.tar.gz?X-Amz-Algorithm=AWS4-HMAC-SHA256",
    "azure": "AccountName=buildcache;",
}


def leaked_in(text: str, s: dict[str, str]) -> list[str]:
    return [name for name, value in s.items() if value in text]


@pytest.mark.parametrize("name", sorted(leaky_texts(credentials())))
def test_each_shape_is_redacted_with_its_context_kept(name: str) -> None:
    s = credentials()
    text = leaky_texts(s)[name]
    assert leaked_in(text, s), "the fixture holds a secret"
    for redact in (redact_if_needed, lambda t: redact_secrets(t)[0]):
        out = redact(text)
        assert not leaked_in(out, s), (name, out)
        assert "[REDACTED" in out
        if name in CONTEXT_KEPT:
            assert CONTEXT_KEPT[name] in out, out
    # Redacting again changes nothing (a redacted record replays: its prompts keep their keys).
    once = redact_if_needed(text)
    assert redact_secrets(once) == (once, 0)
    # Windowed redaction (long tool output) finds them too.
    long = "\n".join(["plain build log line, nothing notable here"] * 200 + [text] + ["tail line"] * 50)
    assert not leaked_in(redact_if_needed(long), s)


def test_a_passphrase_with_spaces_goes_whole() -> None:
    out = redact_if_needed('DB_PASSWORD="tangerine quartz lantern"\npassword: "tangerine quartz lantern"')
    assert "tangerine" not in out, out
    assert "lantern" not in out, out


@pytest.mark.parametrize(
    "text",
    [
        "$ mkdir -p build/out && ssh -p 2222 bob@build.example.com",
        "$ mysql -u root -p app  # prompts for the password",
        "$ docker login registry.example.com",
        "$ curl -u $API_USER:$API_TOKEN https://api.example.com",
        "from huggingface_hub import hf_hub_download; npm_config_cache=/tmp/npm",
        "s3://artifacts/builds/app.tar.gz?X-Amz-Date=20251103T101500Z&X-Amz-Expires=3600",
        "see https://hooks.slack.com/services for the docs",
        "We use Basic authentication for the admin panel.",
        "git log -p -- src/app.py; tar -xzf app.tar.gz; grep -rn password src/",
        "machine learning pipeline: login page renders the password field",
    ],
)
def test_ordinary_command_lines_are_left_alone(text: str) -> None:
    assert redact_secrets(text) == (text, 0)
    assert redact_if_needed(text) == text


def leaky_session(s: dict[str, str]) -> list[dict[str, Any]]:
    texts = list(leaky_texts(s).values())
    half = (len(texts) + 1) // 2
    outputs = {1: "\n".join(texts[:half]), 3: "\n".join(texts[half:])}
    messages = session(16, tool_text=outputs)
    messages[9]["content"] = f"Use this token for the release: {s['hf']} (and {s['gitlab']} for the mirror)"
    messages[10]["tool_calls"][0]["function"]["arguments"] = json.dumps(
        {"cmd": f"curl -u admin:{s['curl_pw']} https://api.example.com/v1/releases"}
    )
    return messages


@pytest.mark.parametrize("backend", ["extractive", "llm"])
async def test_no_credential_reaches_the_summarizer_the_summary_or_the_record(
    provider: FakeProvider, backend: str
) -> None:
    s = credentials()
    messages = leaky_session(s)
    summarizer = None if backend == "extractive" else llm(provider, timeout=5.0)
    instructions = f"focus on the deploy; log in with `docker login -u bot -p {s['docker_pw']}`"
    result = await Compactor(MODEL, summarizer, config()).acompact(messages, instructions)
    assert result.compacted
    assert result.messages_removed >= 30
    for rec in provider.completion_requests:
        assert not leaked_in(rec.raw_body.decode("utf-8", "replace"), s)
    assert not leaked_in(result.summary or "", s)
    assert not leaked_in(json.dumps(result.messages), s)
    assert not leaked_in(json.dumps(result.record), s)  # redacted by default
    assert not leaked_in(json.dumps(result.to_dict()["record"]), s)
    assert_no_loss(messages, result)  # the archive keeps the originals, by design
    assert leaked_in(json.dumps(result.archive), s)


async def test_the_record_keeps_originals_only_when_asked(provider: FakeProvider) -> None:
    s = credentials()
    messages = leaky_session(s)
    instructions = f"log in with `docker login -u bot -p {s['docker_pw']}`"
    opted_out = Compactor(MODEL, None, config(redact_record=False)).compact(messages, instructions)
    assert "docker_pw" in leaked_in(json.dumps(opted_out.record), s)
    assert opted_out.record["config"]["redact_record"] is False


def test_a_redacted_record_still_replays() -> None:
    s = credentials()
    messages = leaky_session(s)
    result = Compactor(MODEL, None, config()).compact(messages, "keep the release notes")
    assert result.record["config"]["redact_record"] is True
    again = replay(json.loads(json.dumps(result.record)), messages)
    assert again.messages == result.messages

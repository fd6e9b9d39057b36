"""The maintained corpus of credential shapes: every shape redaction must catch, as agents see them.

Each :class:`Shape` is a text (tool output, a command, a config file) and the fragments of it that
are secret: none of them may reach any output (the summarizer's prompt, the summary, the ledger,
the record, the stores, recall, the service's answers). Keys are checked line by line (a key body
line alone is a leak), encoded credentials both encoded and decoded. Everything secret is drawn at
run time from a seeded generator: no literal credential sits in the source.

Add a shape here when a new one is found; the parametrised tests of ``test_secrets_corpus.py`` run
it through every output. Last round's shapes (``test_secrets.leaky_texts``) are included.
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"


@dataclass(frozen=True)
class Shape:
    name: str
    text: str
    secrets: tuple[str, ...]
    """Fragments that must not appear in any output (each at least 8 characters)."""


class _Draw:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def __call__(self, n: int, alphabet: str = ALNUM) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(n))

    def password(self, n: int = 14) -> str:
        """Letters, digits and a symbol or two, the way password managers make them."""
        return self(n - 3) + self.rng.choice("!#%&*") + self(1, string.digits) + self(1, string.ascii_uppercase)

    def body_lines(self, lines: int, width: int, last: int) -> list[str]:
        out = [self(width, B64) for _ in range(lines - 1)]
        return [*out, self(last, B64) + "=="]


def _key_block(kind: str, body: list[str]) -> str:
    return "\n".join([f"-----BEGIN {kind}-----", *body, f"-----END {kind}-----"])


def _ansi_line(line: str) -> str:
    """A line of terminal output with colour codes inside it (syntax highlighters, ``bat``)."""
    cut = len(line) // 2
    return f"\x1b[32m{line[:cut]}\x1b[0m\x1b[32m{line[cut:]}\x1b[0m"


def _lines(body: list[str]) -> tuple[str, ...]:
    return tuple(line for line in body if len(line) >= 8)


def shapes(seed: int = 26) -> list[Shape]:
    d = _Draw(seed)
    out: list[Shape] = []

    def add(name: str, text: str, *secrets: str) -> None:
        assert all(s in text for s in secrets if not s.startswith("\x00")), name
        out.append(Shape(name, text, tuple(secrets)))

    # Private keys: armoured, without armour, cut, JSON-escaped, base64-encoded, coloured.
    openssl = d.body_lines(26, 64, 24)
    add("pem_openssl_cat", "$ cat server.key\n" + _key_block("PRIVATE KEY", openssl) + "\n$ ls", *_lines(openssl))
    openssh = d.body_lines(36, 70, 40)
    add("openssh_rsa_3072", "$ cat ~/.ssh/id_rsa\n" + _key_block("OPENSSH PRIVATE KEY", openssh), *_lines(openssh))
    middle = d.body_lines(14, 64, 64)[:-1]
    add("key_body_without_armour", "...scrolled...\n" + "\n".join(middle) + "\n(end of page)", *_lines(middle))
    tail = d.body_lines(9, 64, 30)
    add("key_tail_with_end_only", "[output cut]\n" + "\n".join(tail) + "\n-----END RSA PRIVATE KEY-----", *_lines(tail))
    indented = d.body_lines(8, 64, 20)
    add(
        "key_in_yaml_block_scalar",
        "tls:\n  key: |\n" + "\n".join("    " + x for x in indented) + "\n  cert: ./tls.crt",
        *_lines(indented),
    )
    sa_body = d.body_lines(26, 64, 16)
    service_account = {
        "type": "service_account",
        "project_id": "billing-prod",
        "private_key_id": d(40, "0123456789abcdef"),
        "private_key": _key_block("PRIVATE KEY", sa_body) + "\n",
        "client_email": "deployer@billing-prod.iam.gserviceaccount.com",
    }
    add("service_account_json", json.dumps(service_account, indent=2), *_lines(sa_body))
    cut_body = d.body_lines(12, 64, 64)[:-1]
    escaped = json.dumps({"private_key": "-----BEGIN PRIVATE KEY-----\n" + "\n".join(cut_body)})[:-40]
    add("truncated_json_escaped_key", escaped + " ...[truncated]", *_lines(cut_body)[:-1])
    bare_escaped = d.body_lines(10, 64, 64)
    add("json_escaped_body_without_armour", json.dumps({"key": "\n".join(bare_escaped)}), *_lines(bare_escaped))
    ansi_body = d.body_lines(12, 64, 20)
    coloured = "\n".join(
        [
            "\x1b[1;33m-----BEGIN RSA PRIVATE KEY-----\x1b[0m",
            *(_ansi_line(x) for x in ansi_body),
            "\x1b[1;33m-----END RSA PRIVATE KEY-----\x1b[0m",
        ]
    )
    add(
        "ansi_codes_inside_a_key",
        "$ bat id_rsa\n" + coloured,
        *(x[: len(x) // 2] for x in ansi_body[:-1]),
        *(x[len(x) // 2 :] for x in ansi_body[:-1]),
    )
    encoded_key = base64.b64encode(_key_block("RSA PRIVATE KEY", d.body_lines(20, 64, 30)).encode()).decode()
    add(
        "kubeconfig_client_key_data",
        "users:\n- name: admin\n  user:\n    client-certificate-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t\n"
        f"    client-key-data: {encoded_key}\n",
        encoded_key[20:80],
        encoded_key[-60:-4],
    )

    # Environment lines and config files.
    db_pass, mysql_pwd, master = d.password(), d.password(16), d(32, "0123456789abcdef")
    add("env_db_pass", f"$ env | grep DB\nDB_HOST=db.internal\nDB_PASS={db_pass}", db_pass)
    add("env_mysql_pwd", f"export MYSQL_PWD={mysql_pwd}\nmysql -u app app_prod", mysql_pwd)
    add("env_rails_master_key", f"RAILS_ENV=production\nRAILS_MASTER_KEY={master}", master)
    signing = d(40, ALNUM + "_-")
    add("env_signing_key", f"JWT_SIGNING_KEY={signing} ./bin/server", signing)
    json_pass, json_pwd, phrase = d.password(), d.password(12), f"{d(7, string.ascii_lowercase)} {d.password(10)}"
    add("json_pass", json.dumps({"user": "app", "pass": json_pass, "host": "db"}), json_pass)
    add("json_pwd", json.dumps({"uid": "sa", "pwd": json_pwd}), json_pwd)
    add("yaml_passphrase", f"ssh:\n  key_file: ~/.ssh/deploy\n  passphrase: {phrase}\n", phrase)
    docker_pw = d.password(18)
    docker_auth = base64.b64encode(f"deploy-bot:{docker_pw}".encode()).decode()
    docker_config = {"auths": {"registry.example.com": {"auth": docker_auth}}}
    add("docker_config_auth", "$ cat ~/.docker/config.json\n" + json.dumps(docker_config, indent=2), docker_auth)
    dockerconfigjson = base64.b64encode(json.dumps(docker_config).encode()).decode()
    add(
        "dockerconfigjson_base64",
        f"data:\n  .dockerconfigjson: {dockerconfigjson}\ntype: kubernetes.io/dockerconfigjson",
        dockerconfigjson[:60],
    )
    k8s_pw, k8s_key = d.password(), d(32)
    b64_pw, b64_key = base64.b64encode(k8s_pw.encode()).decode(), base64.b64encode(k8s_key.encode()).decode()
    add(
        "kubernetes_secret_yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: app-secrets\ntype: Opaque\ndata:\n"
        f"  db-password: {b64_pw}\n  stripe: {b64_key}\n",
        b64_pw,
        b64_key,
    )
    k8s_json_pw = base64.b64encode(d.password().encode()).decode()
    add(
        "kubernetes_secret_json",
        json.dumps({"apiVersion": "v1", "kind": "Secret", "data": {"token": k8s_json_pw}}, indent=2),
        k8s_json_pw,
    )
    pgpass = d.password(15)
    add("pgpass_line", f"$ cat ~/.pgpass\ndb.internal:5432:app_prod:deploy:{pgpass}\n", pgpass)

    # Command lines with a password argument.
    for name, template in (
        ("redis_cli_a", "$ redis-cli -h cache.internal -a {} ping\nPONG"),
        ("sshpass_p", "$ sshpass -p '{}' ssh deploy@build.example.com uptime"),
        ("openssl_passin", "$ openssl rsa -in key.pem -passin pass:{} -out key.dec"),
        ("htpasswd_b", "$ htpasswd -bc /etc/nginx/.htpasswd admin {}"),
        ("az_login_p", "$ az login -u ops@example.com -p {} --tenant example"),
        ("oc_login_password", "$ oc login https://api.ocp.example.com:6443 -u admin --password={}"),
    ):
        secret = d.password()
        add(name, template.format(secret), secret)

    # Headers and tokens.
    session_cookie, csrf, set_cookie = d(32), d(32), d(40, ALNUM + "-_")
    add("cookie_header", f"> Cookie: sessionid={session_cookie}; csrftoken={csrf}", session_cookie, csrf)
    add("set_cookie_header", f"< Set-Cookie: _app_session={set_cookie}; Path=/; HttpOnly; Secure", set_cookie)
    drf, apikey = d(40, "0123456789abcdef"), d(32)
    add("authorization_token", f"curl -H 'Authorization: Token {drf}' https://api.example.com/me", drf)
    add("authorization_apikey", f'headers = {{"Authorization": "ApiKey {apikey}"}}', apikey)
    vault = "hvs." + d(90, ALNUM + "_-")
    add("vault_token_bare", f"Success! token: {vault[:4]}\n{vault}", vault[4:])
    raw_at = d(8) + "@" + d(8) + "#"
    add(
        "url_password_with_raw_at",
        f"git clone https://deploy:{raw_at}@git.example.com/org/app.git",
        raw_at[:8],
        raw_at[9:],
    )

    def b64url(data: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    jwt = f"{b64url({'alg': 'HS256', 'typ': 'JWT'})}.{b64url({'sub': d(12)})}.{d(43, ALNUM + '_-')}"
    add("url_encoded_jwt", f"GET /callback?state=xyz&redirect=%2Fhome%3Faccess_token%3D{jwt}%26x%3D1 HTTP/1.1", jwt)
    prose = d(9) + "&" + d(9) + "!"  # the part after "&" used to stay behind
    add("prose_password_with_symbols", f"Note to self: my password: {prose}", prose[:9], prose[10:])

    # Last round's shapes.
    from test_secrets import credentials, leaky_texts

    old = credentials()
    for name, text in leaky_texts(old).items():
        add(f"earlier_{name}", text, *(v for v in old.values() if v in text))
    return out


def leaks(text: str, shape: Shape) -> list[str]:
    """The secret fragments of ``shape`` present in ``text`` (an output)."""
    return [s for s in shape.secrets if s in text]

"""Offline loading of the tokenizer files litellm ships, without importing litellm.

litellm bundles ``anthropic_tokenizer.json`` and tiktoken's BPE files (named by the sha1 of their
download URL) in ``litellm/litellm_core_utils/tokenizers/``. We find that directory with
``importlib.util.find_spec`` (which does not run litellm's 5-second import) and build the encodings
from it, so counting never touches the network and never changes ``TIKTOKEN_CACHE_DIR``.
Everything here loads on first use, once per process, under a lock.
"""

from __future__ import annotations

import binascii
import hashlib
import importlib.util
import threading
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import tiktoken
    from tokenizers import Tokenizer

__all__ = [
    "MAX_TOKENIZER_FILES",
    "TokenizerUnavailableError",
    "anthropic_tokenizer_path",
    "litellm_tokenizer_dir",
    "load_hf_tokenizer",
    "load_tiktoken_encoding",
    "parse_tiktoken_bpe",
]

_LOCK = threading.Lock()
MAX_TOKENIZER_FILES = 16
"""Tokenizer files (``tokenizer.json`` paths) kept loaded at once; the oldest loaded is dropped first."""
_ENCODINGS: dict[str, tiktoken.Encoding] = {}  # at most the two tiktoken encodings supported
_HF_TOKENIZERS: dict[str, Tokenizer] = {}


class TokenizerUnavailableError(RuntimeError):
    """A tokenizer file could not be found or read (litellm missing, or an unusable file)."""


def litellm_tokenizer_dir() -> Path:
    """The directory of tokenizer files bundled with litellm (litellm itself is not imported).

    >>> litellm_tokenizer_dir().name
    'tokenizers'
    """
    spec = importlib.util.find_spec("litellm")
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    for location in locations:
        folder = Path(location) / "litellm_core_utils" / "tokenizers"
        if folder.is_dir():
            return folder
    raise TokenizerUnavailableError(
        "litellm's bundled tokenizer files were not found (is litellm installed?); "
        "use EstimateCounter or pass a tokenizer.json path"
    )


def anthropic_tokenizer_path() -> Path:
    """Path of the ``anthropic_tokenizer.json`` that litellm ships."""
    return litellm_tokenizer_dir() / "anthropic_tokenizer.json"


def load_tiktoken_encoding(name: str) -> tiktoken.Encoding:
    """A tiktoken encoding built from litellm's bundled BPE file (cached; no network).

    >>> load_tiktoken_encoding("o200k_base").encode_ordinary("hello world")
    [24912, 2375]
    """
    encoding = _ENCODINGS.get(name)
    if encoding is not None:
        return encoding
    with _LOCK:
        encoding = _ENCODINGS.get(name)
        if encoding is None:
            encoding = _build_encoding(name)
            _ENCODINGS[name] = encoding
    return encoding


def load_hf_tokenizer(path: str | Path) -> Tokenizer:
    """A HuggingFace ``tokenizers.Tokenizer`` read from a tokenizer.json file (cached per path)."""
    key = str(Path(path).resolve())
    tokenizer = _HF_TOKENIZERS.get(key)
    if tokenizer is not None:
        return tokenizer
    with _LOCK:
        tokenizer = _HF_TOKENIZERS.get(key)
        if tokenizer is None:
            from tokenizers import Tokenizer

            try:
                tokenizer = Tokenizer.from_file(key)
            except Exception as exc:  # the Rust side raises a plain Exception
                raise TokenizerUnavailableError(f"cannot load tokenizer file {key}: {exc}") from exc
            if len(_HF_TOKENIZERS) >= MAX_TOKENIZER_FILES:
                del _HF_TOKENIZERS[next(iter(_HF_TOKENIZERS))]
            _HF_TOKENIZERS[key] = tokenizer
    return tokenizer


def parse_tiktoken_bpe(data: bytes) -> dict[bytes, int]:
    """The token ranks of a tiktoken BPE file (lines of ``base64-token rank``), as ``tiktoken.load`` reads them.

    This is most of a fresh process's tokenizer load, so it is done in bulk: one split of the file,
    the tokens decoded by ``binascii`` directly, and the ranks compared with their line numbers as one
    string (the published files number their lines 0, 1, 2...) instead of parsing 200,000 integers;
    a file numbered otherwise takes the integer parse.

    >>> parse_tiktoken_bpe(b"aGk= 0\nIQ== 1\n")
    {b'hi': 0, b'!': 1}
    >>> parse_tiktoken_bpe(b"aGk= 5\nIQ== 2\n")
    {b'hi': 5, b'!': 2}
    """
    fields = data.split()
    lines = data.count(b"\n") + (bool(data) and not data.endswith(b"\n"))
    if len(fields) != 2 * lines:  # blank lines, or lines of other than two fields: line by line
        try:
            return {
                binascii.a2b_base64(token): int(rank)
                for token, rank in (line.split() for line in data.splitlines() if line)
            }
        except ValueError as exc:
            raise TokenizerUnavailableError(f"a tiktoken BPE file has a line that is not 'token rank': {exc}") from exc
    tokens = map(binascii.a2b_base64, fields[0::2])
    ranks = fields[1::2]
    if b"\n".join(ranks) == "\n".join(map(str, range(len(ranks)))).encode():
        return dict(zip(tokens, range(len(ranks)), strict=True))
    try:
        return dict(zip(tokens, map(int, ranks), strict=True))
    except ValueError as exc:
        raise TokenizerUnavailableError(f"a tiktoken BPE file has a line that is not 'token rank': {exc}") from exc


def _build_encoding(name: str) -> tiktoken.Encoding:
    import tiktoken
    import tiktoken_ext.openai_public as openai_public

    # An encoding someone already loaded (litellm does on its first count) is reused as-is.
    from tiktoken import registry

    loaded = getattr(registry, "ENCODINGS", {}).get(name)
    if isinstance(loaded, tiktoken.Encoding):
        return loaded

    constructor = getattr(openai_public, "ENCODING_CONSTRUCTORS", {}).get(name)
    if constructor is None:
        raise TokenizerUnavailableError(f"unknown tiktoken encoding {name!r}")
    folder = litellm_tokenizer_dir()

    def load_bundled_bpe(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        # litellm names each file by the sha1 of the URL tiktoken would download it from.
        path = folder / hashlib.sha1(url.encode(), usedforsecurity=False).hexdigest()
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise TokenizerUnavailableError(f"litellm does not bundle {url} (looked for {path})") from exc
        if expected_hash and hashlib.sha256(data).hexdigest() != expected_hash:
            raise TokenizerUnavailableError(f"{path} does not match the expected hash of {url}")
        # Parsed here rather than by tiktoken.load, whose cache layer would copy the file into
        # a temp-dir cache as a side effect.
        return parse_tiktoken_bpe(data)

    # tiktoken's own constructor (pattern, special tokens) run with its BPE loader pointed at the
    # bundled file: a copy of the function with its own globals, so nothing shared is patched.
    namespace: dict[str, Any] = {**vars(openai_public), "load_tiktoken_bpe": load_bundled_bpe}
    isolated = types.FunctionType(
        constructor.__code__, namespace, constructor.__name__, constructor.__defaults__, constructor.__closure__
    )
    params = isolated()
    return tiktoken.Encoding(
        name=params["name"],
        pat_str=params["pat_str"],
        mergeable_ranks=params["mergeable_ranks"],
        special_tokens=params["special_tokens"],
        explicit_n_vocab=params.get("explicit_n_vocab"),
    )

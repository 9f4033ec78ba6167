"""The model's tokenizer, for prompts of an exact token length: the target's, a local file, or words.

Four tokenizers behind one protocol (``encode`` text to ids without special tokens, ``decode``
ids to text, and ``special_tokens``: how many a server adds to a completions prompt, e.g. BOS):

- ``VllmTokenizer``: vLLM's ``POST /tokenize`` ``{"model", "prompt"}`` and ``POST /detokenize``
  (the simulator serves the same routes over its word tokenizer).
- ``LlamaCppTokenizer``: llama.cpp ``llama-server``'s ``POST /tokenize`` ``{"content"}`` and
  ``POST /detokenize`` ``{"tokens"}``.
- ``LocalTokenizer``: a ``tokenizer.json`` named by the config's ``target.tokenizer``, read with
  the Hugging Face ``tokenizers`` package (``pip install 'tracker[tokenizer]'``), no download.
- ``WordTokenizer``: the tracker's own (``tracker.inputs.word_tokenizer``), when there is no other.

``open_tokenizer`` picks one: the config's file first, then the target's endpoint (probed: vLLM's
shape, then llama.cpp's), else words with the reason (``fallback``). A tokenizer that stops
answering raises ``TokenizerFailed``, which the prompt builder turns into a recorded fallback.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import aiohttp

from tracker.errors import ConfigError
from tracker.inputs.configs import LoadedConfig
from tracker.inputs.word_tokenizer import split_tokens
from tracker.load.generator import Endpoint
from tracker.redaction import redact_one_line

WORDS = "words"
REQUEST_TIMEOUT_S = 30.0
_PROBE_TEXT = "hello world"


class TokenizerFailed(Exception):
    """A tokenizer endpoint that failed or answered something unusable (the message says which)."""


class Tokenizer(Protocol):
    """``name`` is recorded with the run. Ids never include special tokens."""

    @property
    def name(self) -> str: ...

    @property
    def special_tokens(self) -> int: ...

    async def encode(self, text: str) -> list[int]: ...

    async def decode(self, ids: Sequence[int]) -> str: ...


async def count_tokens(tokenizer: Tokenizer, text: str) -> int:
    return len(await tokenizer.encode(text))


class WordTokenizer:
    """The tracker's word tokenizer: ids are words numbered as first seen, decoded space-joined."""

    special_tokens = 0

    def __init__(self, fallback: str | None = None) -> None:
        self.fallback = fallback  # why no model tokenizer is used; None: words were asked for
        self._ids: dict[str, int] = {}
        self._words: list[str] = []

    @property
    def name(self) -> str:
        return WORDS

    async def encode(self, text: str) -> list[int]:
        return self.encode_now(text)

    def encode_now(self, text: str) -> list[int]:
        ids = []
        for word in split_tokens(text):
            if word not in self._ids:
                self._ids[word] = len(self._words)
                self._words.append(word)
            ids.append(self._ids[word])
        return ids

    async def decode(self, ids: Sequence[int]) -> str:
        return self.decode_now(ids)

    def decode_now(self, ids: Sequence[int]) -> str:
        if any(not 0 <= i < len(self._words) for i in ids):
            raise TokenizerFailed(f"unknown token id in {list(ids)[:8]}")
        return " ".join(self._words[i] for i in ids)


class LocalTokenizer:
    """A Hugging Face ``tokenizer.json`` read from disk (never downloaded)."""

    def __init__(self, path: Path) -> None:
        module = _import_tokenizers(path)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise _unreadable(path, exc) from None
        try:
            self._tokenizer = module.Tokenizer.from_str(data.decode("utf-8", "replace"))
        except Exception as exc:  # the tokenizers package raises a bare Exception on bad input
            raise _unreadable(path, exc) from None
        self._name = f"tokenizer.json {path.name} sha256:{hashlib.sha256(data).hexdigest()[:12]}"
        bare = len(self._tokenizer.encode("", add_special_tokens=False).ids)
        self._special = len(self._tokenizer.encode("", add_special_tokens=True).ids) - bare

    @property
    def name(self) -> str:
        return self._name

    @property
    def special_tokens(self) -> int:
        return self._special

    async def encode(self, text: str) -> list[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=False).ids)

    async def decode(self, ids: Sequence[int]) -> str:
        return str(self._tokenizer.decode(list(ids), skip_special_tokens=False))


def _unreadable(path: Path, exc: Exception) -> ConfigError:
    return ConfigError(f"target.tokenizer: {path}: not a tokenizer.json the tokenizers package "
                       f"can read ({redact_one_line(str(exc))}); name the model's "
                       "tokenizer.json file or its directory")


def _import_tokenizers(path: Path) -> Any:
    try:
        return importlib.import_module("tokenizers")
    except ImportError:
        raise ConfigError(f"target.tokenizer: {path}: reading a tokenizer.json needs the "
                          "'tokenizers' package; install it with pip install "
                          "'tracker[tokenizer]' (or remove target.tokenizer to use the "
                          "target's /tokenize endpoint)") from None


class _EndpointTokenizer:
    """A tokenizer behind HTTP: one aiohttp session, a total timeout per call."""

    flavour = ""

    def __init__(self, session: aiohttp.ClientSession, endpoint: Endpoint, model: str,
                 timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self._session = session
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._root = endpoint.base_url.rstrip("/").removesuffix("/v1")
        self._headers = endpoint.headers
        self._model = model
        self.special_tokens = 0

    @property
    def name(self) -> str:
        return f"{self.flavour} /tokenize"

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        where = f"POST {path}"
        try:
            async with self._session.post(
                    self._root + path, json=body, headers=self._headers,
                    timeout=self._timeout) as response:
                text = await response.text()
                if response.status != 200:
                    raise TokenizerFailed(f"{where} answered HTTP {response.status}: "
                                          f"{redact_one_line(text, 120)}")
                data = await response.json(content_type=None)
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
            raise TokenizerFailed(f"{where} failed: {type(exc).__name__}: "
                                  f"{redact_one_line(str(exc), 160)}") from None
        if not isinstance(data, dict):
            raise TokenizerFailed(f"{where} answered {type(data).__name__}, not an object")
        return data


def _ids(data: dict[str, Any], where: str) -> list[int]:
    tokens = data.get("tokens")
    if not isinstance(tokens, list) or not all(
            isinstance(t, int) and not isinstance(t, bool) for t in tokens):
        raise TokenizerFailed(f"{where} answered without a list of integer 'tokens'")
    return tokens


def _text(data: dict[str, Any], key: str, where: str) -> str:
    text = data.get(key)
    if not isinstance(text, str):
        raise TokenizerFailed(f"{where} answered without a string {key!r}")
    return text


class VllmTokenizer(_EndpointTokenizer):
    """vLLM's (and the simulator's) ``/tokenize`` and ``/detokenize``."""

    flavour = "vllm"

    async def _tokenize(self, text: str, special: bool) -> dict[str, Any]:
        return await self._post("/tokenize", {"model": self._model, "prompt": text,
                                              "add_special_tokens": special})

    async def encode(self, text: str) -> list[int]:
        return _ids(await self._tokenize(text, False), "POST /tokenize")

    async def decode(self, ids: Sequence[int]) -> str:
        data = await self._post("/detokenize", {"model": self._model, "tokens": list(ids)})
        return _text(data, "prompt", "POST /detokenize")

    async def probe(self) -> bool:
        """Whether the target speaks vLLM's /tokenize (``count`` beside ``tokens``)."""
        data = await self._tokenize(_PROBE_TEXT, False)
        if not isinstance(data.get("count"), int) or not _ids(data, "POST /tokenize"):
            return False
        await self.decode(_ids(data, "POST /tokenize"))
        bare = _ids(await self._tokenize("", False), "POST /tokenize")
        self.special_tokens = len(_ids(await self._tokenize("", True), "POST /tokenize")) - len(bare)
        return True


class LlamaCppTokenizer(_EndpointTokenizer):
    """llama.cpp ``llama-server``'s ``/tokenize`` (``content``) and ``/detokenize``."""

    flavour = "llama.cpp"

    async def _tokenize(self, text: str, special: bool) -> list[int]:
        data = await self._post("/tokenize", {"content": text, "add_special": special})
        return _ids(data, "POST /tokenize")

    async def encode(self, text: str) -> list[int]:
        return await self._tokenize(text, False)

    async def decode(self, ids: Sequence[int]) -> str:
        return _text(await self._post("/detokenize", {"tokens": list(ids)}), "content",
                     "POST /detokenize")

    async def probe(self) -> bool:
        ids = await self._tokenize(_PROBE_TEXT, False)
        if not ids:
            return False
        await self.decode(ids)
        self.special_tokens = len(await self._tokenize("", True))
        return True


def find_tokenizer_file(named: str, relative_to: Path | None = None) -> Path:
    """Where a named tokenizer is: ``named`` relative to ``relative_to`` unless absolute. A
    directory means its ``tokenizer.json``. The path may not exist: the caller says so."""
    path = Path(named).expanduser()
    if not path.is_absolute() and relative_to is not None:
        path = relative_to / path
    return path / "tokenizer.json" if path.is_dir() else path


def resolve_tokenizer_path(config: LoadedConfig) -> Path | None:
    """The config's ``target.tokenizer`` as a file, relative to the config file. A directory
    means its ``tokenizer.json``. A missing file is a config error."""
    named = config.config.target.tokenizer
    if named is None:
        return None
    base = Path(config.path).parent if config.path not in ("", "-") else None
    path = find_tokenizer_file(named, base)
    if not path.is_file():
        raise ConfigError(f"{config.path}: target.tokenizer: no file at {path} (got "
                          f"{named!r}); name the model's tokenizer.json or its directory, "
                          "relative to the config file")
    return path


async def _probe_endpoint(session: aiohttp.ClientSession, endpoint: Endpoint, model: str,
                          timeout_s: float) -> Tokenizer | str:
    """The target's tokenizer endpoint, or why there is none."""
    reasons = []
    for kind in (VllmTokenizer, LlamaCppTokenizer):
        candidate = kind(session, endpoint, model, timeout_s)
        try:
            if await candidate.probe():
                return candidate
            reasons.append(f"{kind.flavour}: POST /tokenize gave no tokens")
        except TokenizerFailed as exc:
            reasons.append(f"{kind.flavour}: {exc}")
    return "the target has no usable tokenizer endpoint (" + "; ".join(reasons) + ")"


@asynccontextmanager
async def open_tokenizer(endpoint: Endpoint, model: str, local: Path | None = None, *,
                         timeout_s: float = REQUEST_TIMEOUT_S) -> AsyncIterator[Tokenizer]:
    """The tokenizer prompts are built with, open for the block (its HTTP session closes after).
    Never fails for want of a tokenizer: words, with ``fallback`` saying why. ``timeout_s``:
    the most one tokenizer request may take."""
    if local is not None:
        yield LocalTokenizer(local)
        return
    async with aiohttp.ClientSession(trust_env=True) as session:
        found = await _probe_endpoint(session, endpoint, model, timeout_s)
        yield WordTokenizer(fallback=found) if isinstance(found, str) else found

"""The simulator's aiohttp application: OpenAI-compatible routes over one ``Engine``.

Every response carries ``x-tracker-simulated: true``. A streamed request writes each token chunk
as soon as the engine step that made it ends. A client that goes away is dropped from the engine.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4

import tracker
from tracker.inputs.configs import ServingConfig
from tracker.inputs.word_tokenizer import split_tokens
from tracker.sim.batching import ABORT, SimRequest
from tracker.sim.chunks import DONE, ResponseEncoder
from tracker.sim.engine import Engine, EngineClosedError
from tracker.sim.prometheus import render_metrics
from tracker.sim.protocol import (
    ApiError,
    CompletionRequest,
    ModelLimits,
    parse_chat_request,
    parse_completion_request,
    parse_json_object,
)

SIMULATED_HEADER = "x-tracker-simulated"
_SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
Parser = Callable[[dict[str, Any], ModelLimits], CompletionRequest]


def create_app(config: ServingConfig, engine: Engine) -> web.Application:
    handlers = _Handlers(config, engine)
    app = web.Application()
    app.on_response_prepare.append(_mark_simulated)
    app.router.add_get("/v1/models", handlers.models)
    app.router.add_post("/v1/chat/completions", handlers.chat_completions)
    app.router.add_post("/v1/completions", handlers.completions)
    app.router.add_get("/health", handlers.health)
    app.router.add_get("/version", handlers.version)
    app.router.add_get("/metrics", handlers.metrics)
    app.router.add_post("/tokenize", handlers.tokenize)
    app.router.add_post("/detokenize", handlers.detokenize)
    return app


async def _mark_simulated(_request: web.Request, response: web.StreamResponse) -> None:
    response.headers[SIMULATED_HEADER] = "true"


def error_response(error: ApiError) -> web.Response:
    return web.json_response(error.body(), status=error.status)


def _shutting_down() -> ApiError:
    return ApiError(503, "The simulator is shutting down; retry against a running one.", None,
                    "service_unavailable", "server_error")


class _Vocabulary:
    """The word tokenizer's tokens numbered as first seen, so ids decode back to the words."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._words: list[str] = []

    def encode(self, text: str) -> list[int]:
        for word in split_tokens(text):
            if word not in self._ids:
                self._ids[word] = len(self._words)
                self._words.append(word)
        return [self._ids[word] for word in split_tokens(text)]

    def decode(self, tokens: object) -> str:
        if not isinstance(tokens, list) or not all(
                isinstance(t, int) and not isinstance(t, bool) for t in tokens):
            raise ApiError(400, "tokens: required, a list of token ids", "tokens")
        unknown = [t for t in tokens if not 0 <= t < len(self._words)]
        if unknown:
            raise ApiError(400, f"tokens: unknown token id {unknown[0]}", "tokens")
        return " ".join(self._words[t] for t in tokens)


def _tokenize_text(body: dict[str, Any]) -> str:
    """The text ``/tokenize`` counts: ``prompt``, or the contents of ``messages``."""
    messages = body.get("messages")
    if isinstance(messages, list):
        contents = [m.get("content") if isinstance(m, dict) else None for m in messages]
        if all(isinstance(c, str) for c in contents):
            return " ".join(str(c) for c in contents)
        raise ApiError(400, "messages: each must be an object with a string content", "messages")
    prompt = body.get("prompt")
    if not isinstance(prompt, str):
        raise ApiError(400, "prompt: required, a string (or give messages)", "prompt")
    return prompt


class _Handlers:
    def __init__(self, config: ServingConfig, engine: Engine) -> None:
        self._engine = engine
        modules = config.engine.lora_modules if config.engine.enable_lora else None
        self._lora_modules = dict(sorted((modules or {}).items()))
        self._limits = ModelLimits(config.target.model, engine.max_model_len,
                                   frozenset(self._lora_modules))
        self._vocabulary = _Vocabulary()

    async def models(self, _request: web.Request) -> web.Response:
        """The base model, then each LoRA adapter with the base as its parent (as vLLM lists
        them)."""
        created = int(time.time())
        card = {"id": self._limits.model, "object": "model", "created": created,
                "owned_by": "tracker-sim", "root": self._limits.model, "parent": None,
                "max_model_len": self._limits.max_model_len}
        adapters = [{"id": name, "object": "model", "created": created, "owned_by": "tracker-sim",
                     "root": path, "parent": self._limits.model}
                    for name, path in self._lora_modules.items()]
        return web.json_response({"object": "list", "data": [card, *adapters]})

    async def health(self, _request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def version(self, _request: web.Request) -> web.Response:
        return web.json_response({"version": f"tracker-sim {tracker.__version__}"})

    async def metrics(self, _request: web.Request) -> web.Response:
        text = render_metrics(self._engine.snapshot(), self._limits.model)
        return web.Response(body=text.encode(), headers={"Content-Type": CONTENT_TYPE_PLAIN_0_0_4})

    async def tokenize(self, request: web.Request) -> web.Response:
        """vLLM's ``/tokenize``: ``prompt`` or ``messages`` (their contents, as chat counts them).
        The word tokenizer adds no special tokens."""
        try:
            body = parse_json_object(await request.read())
            self._check_model(body)
            text = _tokenize_text(body)
        except ApiError as exc:
            return error_response(exc)
        tokens = self._vocabulary.encode(text)
        return web.json_response({"count": len(tokens), "max_model_len":
                                  self._limits.max_model_len, "tokens": tokens,
                                  "token_strs": None})

    def _check_model(self, body: dict[str, Any]) -> None:
        self._limits.adapter_of(body.get("model"))  # the base model or an adapter, else a 404

    async def detokenize(self, request: web.Request) -> web.Response:
        try:
            body = parse_json_object(await request.read())
            self._check_model(body)
            prompt = self._vocabulary.decode(body.get("tokens"))
        except ApiError as exc:
            return error_response(exc)
        return web.json_response({"prompt": prompt})

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, parse_chat_request)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, parse_completion_request)

    async def _complete(self, request: web.Request, parse: Parser) -> web.StreamResponse:
        try:
            completion = parse(parse_json_object(await request.read()), self._limits)
            sim_request = self._engine.submit(completion.generation)
        except ApiError as exc:
            return error_response(exc)
        except EngineClosedError:
            return error_response(_shutting_down())
        model = completion.generation.adapter or self._limits.model  # vLLM echoes the adapter
        try:
            if completion.stream:
                return await _stream(request, completion, sim_request, model)
            return await _respond_whole(completion, sim_request, model)
        finally:
            self._engine.abort(sim_request)  # no-op once finished; frees a dropped client's slot


async def _stream(
    request: web.Request, completion: CompletionRequest, sim_request: SimRequest, model: str
) -> web.StreamResponse:
    encoder = ResponseEncoder(completion.chat, model)
    response = web.StreamResponse(headers=_SSE_HEADERS)
    try:
        await response.prepare(request)
        if completion.chat:
            await response.write(encoder.role_chunk())
        if not await _stream_pieces(response, encoder, sim_request):
            return response
        if completion.include_usage:
            prompt_tokens = completion.generation.prompt_tokens
            await response.write(encoder.usage_chunk(prompt_tokens, sim_request.generated,
                                                     sim_request.cached_tokens))
        await response.write(DONE)
        await response.write_eof()
    except ConnectionResetError:
        pass  # the client went away; the caller aborts its request
    return response


async def _stream_pieces(
    response: web.StreamResponse, encoder: ResponseEncoder, sim_request: SimRequest
) -> bool:
    """Write pieces as they come, and return False if the request was aborted (server shutting
    down)."""
    sent = 0
    pieces = sim_request.pieces
    while True:
        if sent < len(pieces):
            new = pieces[sent:]
            sent += len(new)
            reason = sim_request.finish_reason if sent == len(pieces) else None
            await response.write(encoder.piece_chunks(new, None if reason == ABORT else reason))
        elif sim_request.finish_reason is not None:
            return sim_request.finish_reason != ABORT
        else:
            await sim_request.wait_for_update()


async def _respond_whole(
    completion: CompletionRequest, sim_request: SimRequest, model: str
) -> web.Response:
    while sim_request.finish_reason is None:
        await sim_request.wait_for_update()
    if sim_request.finish_reason == ABORT:
        return error_response(_shutting_down())
    encoder = ResponseEncoder(completion.chat, model)
    body = encoder.full_body("".join(sim_request.pieces), sim_request.finish_reason,
                             completion.generation.prompt_tokens, sim_request.generated,
                             sim_request.cached_tokens)
    return web.json_response(body)

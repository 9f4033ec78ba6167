"""OpenAI request bodies, checked once at the boundary, and OpenAI-style error bodies.

Unknown fields are ignored (clients send ``top_p``, ``seed`` and the like), as OpenAI-compatible
servers do. The fields the simulator acts on are checked, and a bad one is a 400 whose message
names the field, the bad value and what is allowed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracker.inputs.word_tokenizer import count_tokens
from tracker.jsontext import UntrustedJSONError, parse_untrusted_json
from tracker.sim.engine import Generation

COMPLETION_DEFAULT_MAX_TOKENS = 16  # OpenAI's and vLLM's; chat defaults to the rest of the context


class ApiError(Exception):
    """An error answered as ``{"error": {"message", "type", "param", "code"}}``."""

    def __init__(
        self, status: int, message: str, param: str | None = None, code: str | None = None,
        error_type: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.error_type = error_type

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.error_type,
                          "param": self.param, "code": self.code}}


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    chat: bool
    generation: Generation
    stream: bool
    include_usage: bool


@dataclass(frozen=True, slots=True)
class ModelLimits:
    model: str
    max_model_len: int
    adapters: frozenset[str] = frozenset()  # the LoRA adapters served (engine.lora_modules)

    def adapter_of(self, model: object) -> str | None:
        """The adapter a request's ``model`` names (None: the base model, or no model given).
        A name that is neither is vLLM's 404."""
        if model is None or model == self.model:
            return None
        if isinstance(model, str) and model in self.adapters:
            return model
        raise ApiError(404, f"The model `{model}` does not exist.", "model", "model_not_found")


def parse_json_object(raw: bytes) -> dict[str, Any]:
    try:
        body = parse_untrusted_json(raw)
    except UntrustedJSONError as exc:
        why = ("nests too deeply to parse" if exc.too_deep
               else f"is not valid JSON: {exc}")
        raise ApiError(400, f"The request body {why}") from None
    if not isinstance(body, dict):
        raise ApiError(400, f"The request body must be a JSON object (got {type(body).__name__})")
    return body


def parse_chat_request(body: dict[str, Any], limits: ModelLimits) -> CompletionRequest:
    adapter = limits.adapter_of(body.get("model"))
    roles, contents = _parse_messages(body.get("messages"))
    max_tokens = body.get("max_completion_tokens")
    param = "max_completion_tokens"
    if max_tokens is None:
        max_tokens, param = body.get("max_tokens"), "max_tokens"
    pairs = zip(roles, contents, strict=True)
    prompt_text = "\x1e".join(f"{role}\x1f{text}" for role, text in pairs)
    prompt_tokens = sum(count_tokens(text) for text in contents)
    return _build(body, True, prompt_text, contents, prompt_tokens, (max_tokens, param), limits,
                  adapter)


def parse_completion_request(body: dict[str, Any], limits: ModelLimits) -> CompletionRequest:
    adapter = limits.adapter_of(body.get("model"))
    prompt = _parse_prompt(body.get("prompt"))
    max_tokens = body.get("max_tokens", COMPLETION_DEFAULT_MAX_TOKENS)
    prompt_tokens = count_tokens(prompt)
    return _build(body, False, prompt, (prompt,), prompt_tokens, (max_tokens, "max_tokens"), limits,
                  adapter)


def _build(
    body: dict[str, Any], chat: bool, prompt_text: str, parts: tuple[str, ...],
    prompt_tokens: int, max_tokens_field: tuple[object, str], limits: ModelLimits,
    adapter: str | None = None,
) -> CompletionRequest:
    _check_n(body.get("n"))
    max_tokens = _parse_max_tokens(*max_tokens_field, prompt_tokens, limits.max_model_len, chat)
    stream = _parse_bool(body, "stream")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise ApiError(400, "stream_options must be an object such as {\"include_usage\": true}",
                       "stream_options")
    include_usage = _parse_bool(options or {}, "include_usage")
    generation = Generation(
        prompt_text=prompt_text, prompt_parts=parts, prompt_tokens=prompt_tokens,
        max_tokens=max_tokens, temperature=_parse_temperature(body.get("temperature")),
        ignore_eos=_parse_bool(body, "ignore_eos"), adapter=adapter,
    )
    return CompletionRequest(chat, generation, stream, include_usage)


def _parse_messages(messages: object) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages: required, a non-empty list of {role, content} objects "
                       f"(got {_describe(messages)})", "messages")
    roles: list[str] = []
    contents: list[str] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ApiError(400, f"messages[{index}]: must be an object with a string role",
                           "messages")
        roles.append(message["role"])
        contents.append(_parse_content(message.get("content"), index))
    return tuple(roles), tuple(contents)


def _parse_content(content: object, index: int) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [part.get("text") for part in content if isinstance(part, dict)]
        if len(texts) == len(content) and all(isinstance(text, str) for text in texts):
            return "\n".join(str(text) for text in texts)
    raise ApiError(400, f"messages[{index}].content: must be a string or a list of "
                   "{\"type\": \"text\", \"text\": ...} parts", "messages")


def _parse_prompt(prompt: object) -> str:
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise ApiError(400, "prompt: required, one string (the simulator takes one prompt per "
                       f"request; got {_describe(prompt)})", "prompt")
    return prompt


def _parse_max_tokens(
    value: object, param: str, prompt_tokens: int, max_model_len: int, chat: bool
) -> int:
    where = "messages" if chat else "prompt"
    if value is None:
        if prompt_tokens >= max_model_len:
            raise ApiError(400, f"This model's maximum context length is {max_model_len} tokens. "
                           f"However, your {where} resulted in {prompt_tokens} tokens. Please "
                           f"reduce the length of the {where}.", where, "context_length_exceeded")
        return max_model_len - prompt_tokens
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ApiError(400, f"{param} must be an integer of at least 1, got {value!r}.", param)
    if prompt_tokens + value > max_model_len:
        raise ApiError(
            400, f"This model's maximum context length is {max_model_len} tokens. However, you "
            f"requested {prompt_tokens + value} tokens ({prompt_tokens} in the {where}, {value} "
            f"in the completion). Please reduce the length of the {where} or completion.",
            where, "context_length_exceeded",
        )
    return value


def _parse_temperature(value: object) -> float:
    if value is None:
        return 1.0
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ApiError(400, f"temperature must be a number >= 0, got {value!r}.", "temperature")
    return float(value)


def _parse_bool(body: dict[str, Any], key: str) -> bool:
    value = body.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ApiError(400, f"{key} must be true or false, got {value!r}.", key)
    return value


def _check_n(value: object) -> None:
    if value is not None and value != 1:
        raise ApiError(400, f"n must be 1 in the simulator, got {value!r}.", "n")


def _describe(value: object) -> str:
    return "nothing" if value is None else type(value).__name__

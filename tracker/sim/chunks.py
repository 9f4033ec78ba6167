"""OpenAI response bodies: streamed SSE chunks and whole (non-streamed) responses.

A token chunk is two precomputed byte strings around the JSON-escaped piece, so streaming costs
one ``json.dumps`` of a short string per token. As vLLM does, the chunk of the last token carries
the finish reason. The usage chunk (``"choices": []``) follows only when asked for. The usage
carries ``prompt_tokens_details.cached_tokens`` (the prompt tokens found in the prefix cache) as
vLLM's does with ``--enable-prompt-tokens-details``: only when some were, so a miss has no details.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

DONE = b"data: [DONE]\n\n"


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def compute_usage(prompt_tokens: int, completion_tokens: int,
                  cached_tokens: int = 0) -> dict[str, Any]:
    usage: dict[str, Any] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                             "total_tokens": prompt_tokens + completion_tokens}
    if cached_tokens:  # vLLM: `if self.enable_prompt_tokens_details and num_cached_tokens`
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    return usage


class ResponseEncoder:
    """Bodies of one response: chat (``chat.completion[.chunk]``) or completions."""

    def __init__(self, chat: bool, model: str) -> None:
        self.chat = chat
        prefix = "chatcmpl" if chat else "cmpl"
        self._id = f"{prefix}-{uuid.uuid4().hex}"
        self._created = int(time.time())
        self._model = model
        head = _dumps(self._head(stream=True))[:-1]
        if chat:
            self._piece_start = f'data: {head},"choices":[{{"index":0,"delta":{{"content":'
            self._piece_end = '},"logprobs":null,"finish_reason":'
        else:
            self._piece_start = f'data: {head},"choices":[{{"index":0,"text":'
            self._piece_end = ',"logprobs":null,"finish_reason":'
        self._stream_head = head

    def role_chunk(self) -> bytes:
        """The chat stream's first chunk: the assistant role with empty content."""
        choice = {"index": 0, "delta": {"role": "assistant", "content": ""},
                  "logprobs": None, "finish_reason": None}
        return f'data: {self._stream_head},"choices":[{_dumps(choice)}]}}\n\n'.encode()

    def piece_chunks(self, pieces: list[str], finish_reason: str | None) -> bytes:
        """One chunk per piece, the last one carrying ``finish_reason`` when given."""
        start, end = self._piece_start, self._piece_end
        last = len(pieces) - 1
        chunks = [
            f"{start}{_dumps(piece)}{end}"
            f"{_dumps(finish_reason) if i == last and finish_reason else 'null'}}}]}}\n\n"
            for i, piece in enumerate(pieces)
        ]
        return "".join(chunks).encode()

    def usage_chunk(self, prompt_tokens: int, completion_tokens: int,
                    cached_tokens: int = 0) -> bytes:
        usage = _dumps(compute_usage(prompt_tokens, completion_tokens, cached_tokens))
        return f'data: {self._stream_head},"choices":[],"usage":{usage}}}\n\n'.encode()

    def full_body(
        self, text: str, finish_reason: str, prompt_tokens: int, completion_tokens: int,
        cached_tokens: int = 0,
    ) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": finish_reason}
        if self.chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        return {**self._head(stream=False), "choices": [choice],
                "usage": compute_usage(prompt_tokens, completion_tokens, cached_tokens)}

    def _head(self, stream: bool) -> dict[str, Any]:
        kind = "text_completion"
        if self.chat:
            kind = "chat.completion.chunk" if stream else "chat.completion"
        return {"id": self._id, "object": kind, "created": self._created, "model": self._model}

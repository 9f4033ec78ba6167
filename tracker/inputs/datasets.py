"""Datasets of prompts: ShareGPT JSON, OpenAI chat JSONL and plain JSONL, read as a stream.

- ``sharegpt``: one JSON array of ``{"conversations": [{"from": "human", "value": "…"},
  {"from": "gpt", "value": "…"}, …]}`` (``user``, ``assistant``, ``chatgpt``, ``bing`` and
  ``system`` are read too, as ShareGPT dumps spell them).
- ``openai-chat``: one ``{"messages": [{"role": "system"|"user"|"assistant", "content": "…"}]}``
  a line (``content`` is a string or a list of ``{"type": "text", "text": "…"}`` parts).
- ``jsonl``: one ``{"prompt": "…", "output_tokens": N}`` a line (``output_tokens`` is optional).

Other keys are ignored, and blank lines of a JSONL file are skipped. Each record becomes a
``DatasetItem``: its system prompt (the system messages before the first question) and its turns,
a question with its recorded answer. Consecutive messages of one role are joined by a blank line,
an answer before any question is dropped, and an empty message counts as absent.

A single-turn workload sends each sampled item's first question (``build_dataset_prompt``: the
one place a prompt is made from an item, so an exact-length tokenizer can replace it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tracker.inputs.datafiles import DataFile, bad_field, iter_json_array, parse_json_line
from tracker.inputs.dataset_sampling import OutputDraws, describe_filters, sample_items
from tracker.inputs.prompt_sources import DatasetPrompts
from tracker.inputs.prompts import derive_seed
from tracker.inputs.traffic import Message, PlannedRequest, WorkloadTraffic
from tracker.inputs.word_tokenizer import count_tokens

SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
                  "chatgpt": "assistant", "bing": "assistant", "system": "system"}
OPENAI_ROLES = {"user": "user", "assistant": "assistant", "system": "system"}
FILTERS = ("min_input_tokens", "max_input_tokens", "min_output_tokens", "max_output_tokens")


@dataclass(frozen=True, slots=True)
class DatasetTurn:
    user: str
    answer: str | None = None  # the recorded assistant answer
    output_tokens: int | None = None  # recorded: the answer's length, or the file's own count


@dataclass(frozen=True, slots=True)
class DatasetItem:
    line: int  # where the record starts in the file
    turns: tuple[DatasetTurn, ...]
    system: str | None = None


def read_dataset(file: DataFile, fmt: str) -> Iterator[DatasetItem]:
    """The file's records as items, one at a time (a malformed one is a ConfigError)."""
    if fmt == "sharegpt":
        for line, record in iter_json_array(file, "ShareGPT conversations"):
            yield parse_sharegpt(record, f"{file.path}:{line}", line)
        return
    what = "an OpenAI chat record" if fmt == "openai-chat" else "a prompt record"
    parse = parse_openai_chat if fmt == "openai-chat" else parse_prompt_line
    for number, text in file.lines():
        if text.strip():
            where = f"{file.path}:{number}"
            yield parse(parse_json_line(text, where, what), where, number)


def parse_sharegpt(record: Any, where: str, line: int) -> DatasetItem:
    if not isinstance(record, Mapping):
        raise bad_field(where, "(item)", "each item must be an object with conversations",
                        record, 'write {"conversations": [...]}')
    turns = record.get("conversations")
    if not isinstance(turns, list):
        raise bad_field(where, "conversations", "must be a list of turns", turns,
                        'write [{"from": "human", "value": "..."}, ...]')
    messages: list[tuple[str, str]] = []
    for i, turn in enumerate(turns):
        if not isinstance(turn, Mapping):
            raise bad_field(where, f"conversations[{i}]", "must be an object", turn,
                            'write {"from": "human", "value": "..."}')
        role = _role(SHAREGPT_ROLES, turn.get("from"))
        if role is None:
            raise bad_field(where, f"conversations[{i}].from", "must be human or gpt (or user, "
                            "assistant, system)", turn.get("from"), "fix the role")
        value = turn.get("value")
        if not isinstance(value, str):
            raise bad_field(where, f"conversations[{i}].value", "must be a string", value,
                            "write the turn's text")
        messages.append((role, check_text(value, where, f"conversations[{i}].value")))
    return build_item(messages, line)


def parse_openai_chat(record: Mapping[str, Any], where: str, line: int) -> DatasetItem:
    messages = record.get("messages")
    if not isinstance(messages, list):
        raise bad_field(where, "messages", "must be a list of messages", messages,
                        'write {"messages": [{"role": "user", "content": "..."}]}')
    parsed: list[tuple[str, str]] = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise bad_field(where, f"messages[{i}]", "must be an object", message,
                            'write {"role": "user", "content": "..."}')
        role = _role(OPENAI_ROLES, message.get("role"))
        if role is None:
            raise bad_field(where, f"messages[{i}].role", "must be system, user or assistant",
                            message.get("role"), "fix the role")
        text = _content_text(message.get("content"), where, i)
        parsed.append((role, check_text(text, where, f"messages[{i}].content")))
    return build_item(parsed, line)


def _role(roles: Mapping[str, str], value: Any) -> str | None:
    return roles.get(value) if isinstance(value, str) else None


def _content_text(content: Any, where: str, index: int) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(part, Mapping) and part.get("type") == "text"
                                         and isinstance(part.get("text"), str)
                                         for part in content):
        return "\n".join(part["text"] for part in content)
    raise bad_field(where, f"messages[{index}].content", "must be a string or a list of text "
                    "parts", content, 'write "content": "..."')


def parse_prompt_line(record: Mapping[str, Any], where: str, line: int) -> DatasetItem:
    prompt = record.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise bad_field(where, "prompt", "must be a non-empty string", prompt,
                        'write {"prompt": "...", "output_tokens": 128}')
    check_text(prompt, where, "prompt")
    output = record.get("output_tokens")
    if output is not None and (not isinstance(output, int) or isinstance(output, bool)
                               or output < 1):
        raise bad_field(where, "output_tokens", "must be a positive integer", output,
                        "write the answer's length in tokens, or leave the key out")
    return DatasetItem(line, (DatasetTurn(prompt, None, output),))


def check_text(text: str, where: str, field: str) -> str:
    """``text`` when it is valid Unicode. A lone surrogate (a JSON ``\\ud800`` without its pair)
    cannot be sent or stored and is a ConfigError naming the place."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        shown = text[max(0, exc.start - 20):exc.start + 1].encode("utf-8", "backslashreplace")
        raise bad_field(where, field, f"holds a lone surrogate at character {exc.start} (not "
                        "valid Unicode)", shown.decode("utf-8"),
                        "fix the text: a \\ud800-\\udbff escape must be followed by a "
                        "\\udc00-\\udfff one") from None
    return text


def build_item(messages: list[tuple[str, str]], line: int) -> DatasetItem:
    """Turns from (role, text) messages: one role's consecutive messages joined, an answer
    before any question dropped, empty messages skipped, system messages after the first
    question ignored."""
    system: list[str] = []
    turns: list[tuple[list[str], list[str]]] = []  # (question parts, answer parts)
    for role, text in messages:
        if not text.strip():
            continue
        if role == "system":
            if not turns:
                system.append(text)
        elif role == "user":
            if not turns or turns[-1][1]:
                turns.append(([], []))
            turns[-1][0].append(text)
        elif turns:
            turns[-1][1].append(text)
    built = []
    for question, answer in turns:
        reply = "\n\n".join(answer) if answer else None
        built.append(DatasetTurn("\n\n".join(question), reply,
                                 None if reply is None else count_tokens(reply)))
    return DatasetItem(line, tuple(built), "\n\n".join(system) if system else None)


def build_dataset_prompt(item: DatasetItem) -> tuple[Message, ...]:
    """The messages of a single-turn request: the item's system prompt and first question."""
    opening = (Message("system", item.system),) if item.system else ()
    return (*opening, Message("user", item.turns[0].user))


def count_prompt_tokens(item: DatasetItem) -> int:
    return count_tokens(item.system or "") + count_tokens(item.turns[0].user)


def _keeps(source: DatasetPrompts) -> Callable[[DatasetItem], bool]:
    def keep(item: DatasetItem) -> bool:
        if not item.turns:
            return False
        tokens = count_prompt_tokens(item)
        if tokens < source.min_input_tokens or (source.max_input_tokens or tokens) < tokens:
            return False
        output = item.turns[0].output_tokens
        return output is None or (source.min_output_tokens <= output
                                  <= (source.max_output_tokens or output))
    return keep


def build_dataset_traffic(file: DataFile, source: DatasetPrompts, *, seed: int, name: str,
                          total: int, max_tokens: int) -> WorkloadTraffic:
    """``total`` requests (warm-up first) from a seeded sample of the file's items."""
    items = sample_items(read_dataset(file, source.format), _keeps(source), total,
                         derive_seed(seed, name, "sample"), str(file.path),
                         describe_filters(source, FILTERS))
    draws = OutputDraws(source.output_tokens, max_tokens, derive_seed(seed, name, "output"))
    return WorkloadTraffic(requests=tuple(
        PlannedRequest(build_dataset_prompt(item),
                       max_tokens=draws.next(item.turns[0].output_tokens),
                       requested_input_tokens=count_prompt_tokens(item))
        for item in items))

"""The line formats users bring, read as quality items (the tracker's own format is ``sets``).

A line is told apart by its keys:

- The tracker's own: ``prompt`` (``tracker.quality.sets``).
- Multiple choice (MMLU-style): ``question``, ``choices`` (2 to 26 texts) and ``answer``, a
  letter ("B") or a 0-based index (1). The prompt lists the choices as "A. ...", one a line, and
  asks for the letter, which the ``choice`` scorer reads.
- GSM8K-style: ``question`` and ``answer``, a worked answer whose last line is ``#### <number>``
  (thousands separators allowed). The question is the prompt, as is. The ``numeric`` scorer takes
  the answer's last number ("... so she has 42 left." scores as 42).

Either may carry an ``id`` (else ``line-<n>``, its line in the file) and a ``subject``, which is
kept out of the prompt. Any other key is refused, naming the line and the keys allowed.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

_FINAL = re.compile(r"####\s*([-+]?[\d,]*\.?\d+)\s*$")
CHOICE_INSTRUCTION = "Answer with the letter only."


class _Line(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str | None = None
    subject: str | None = None
    question: str = Field(min_length=1)


class GsmLine(_Line):
    answer: str


class ChoiceLine(_Line):
    choices: list[str] = Field(min_length=2, max_length=26)
    answer: str | int


def describe_error(exc: ValidationError, model: type[BaseModel]) -> str:
    """``field: message (got value); allowed keys`` for the first error of a line."""
    error = exc.errors()[0]
    loc = ".".join(str(part) for part in error["loc"]) or "(item)"
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        return f"{loc}: unknown key; allowed: {', '.join(model.model_fields)}"
    if error["type"] != "missing":
        message += f" (got {str(error.get('input'))[:60]!r})"
    return f"{loc}: {message}"


def _item_id(line: _Line, number: int) -> str:
    return line.id if line.id is not None else f"line-{number}"


def convert_gsm(data: Mapping[str, Any], number: int) -> dict[str, Any]:
    line = GsmLine.model_validate(data)
    found = _FINAL.search(line.answer.strip())
    if found is None:
        tail = line.answer.strip()[-40:]
        raise ValueError(f"answer: a GSM8K-style answer must end with '#### <number>' (got "
                         f"...{tail!r}); put the final number after ####")
    value = float(found.group(1).replace(",", ""))
    expected: int | float = int(value) if value.is_integer() else value
    return {"id": _item_id(line, number), "prompt": line.question, "expected": expected,
            "scorer": "numeric", "answer": str(expected)}


def _choice_letter(answer: str | int, count: int) -> str:
    letters = string.ascii_uppercase[:count]
    if isinstance(answer, int):
        if not 0 <= answer < count:
            raise ValueError(f"answer: index {answer} is not one of the {count} choices "
                             f"(0 to {count - 1}); give a 0-based index or a letter")
        return letters[answer]
    letter = answer.strip().upper()
    if len(letter) != 1 or letter not in letters:
        raise ValueError(f"answer: {answer!r} is not one of the letters {letters}; give the "
                         "right choice's letter or 0-based index")
    return letter


def convert_choice(data: Mapping[str, Any], number: int) -> dict[str, Any]:
    line = ChoiceLine.model_validate(data)
    letter = _choice_letter(line.answer, len(line.choices))
    listed = "\n".join(f"{string.ascii_uppercase[i]}. {text}"
                       for i, text in enumerate(line.choices))
    return {"id": _item_id(line, number),
            "prompt": f"{line.question}\n{listed}\n{CHOICE_INSTRUCTION}",
            "expected": letter, "scorer": "choice",
            "params": {"options": string.ascii_uppercase[:len(line.choices)]},
            "answer": letter}


def convert_line(data: Mapping[str, Any], number: int) -> Mapping[str, Any]:
    """The line as the tracker's own item (unchanged when it is one already). Raises ValueError
    with ``field: problem; fix``."""
    if "prompt" in data or "question" not in data:
        return data
    model: type[BaseModel] = ChoiceLine if "choices" in data else GsmLine
    try:
        return convert_choice(data, number) if model is ChoiceLine else convert_gsm(data, number)
    except ValidationError as exc:
        kind = "multiple-choice" if model is ChoiceLine else "GSM8K-style"
        raise ValueError(f"{describe_error(exc, model)} (a {kind} line)") from None

"""JSON from outside the process, parsed in one place: a server's body or SSE event, a result or
data file, a line a child process wrote. Whatever the text, the caller gets a value or one error.

``parse_untrusted_json`` raises ``UntrustedJSONError`` (a ``json.JSONDecodeError``, so a
``ValueError``) for anything that is not one JSON document: invalid text, bytes that are no
Unicode, an integer past Python's 4,300 digits, or nesting past the interpreter's recursion limit
("[[[[…" to max_tokens), which sets ``too_deep`` so a caller can say so in its own words.
"""

from __future__ import annotations

import json
from typing import Any


class UntrustedJSONError(json.JSONDecodeError):
    """The text is not one JSON document.

    ``msg``, ``lineno`` and ``colno`` say where, as the decoder's do.
    """

    def __init__(self, msg: str, doc: str, pos: int, *, too_deep: bool = False) -> None:
        super().__init__(msg, doc, pos)
        self.too_deep = too_deep


def parse_untrusted_json(text: str | bytes) -> Any:
    """The one JSON document in ``text``. Anything else raises ``UntrustedJSONError``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UntrustedJSONError(exc.msg, exc.doc, exc.pos) from None
    except RecursionError:
        raise UntrustedJSONError("nested too deeply", "", 0, too_deep=True) from None
    except ValueError as exc:  # undecodable bytes, an integer of thousands of digits
        raise UntrustedJSONError(str(exc), "", 0) from None

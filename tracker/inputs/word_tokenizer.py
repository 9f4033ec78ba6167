"""The tracker's own word tokenizer: one token per word, CJK character or punctuation mark.

Real tokenizers cannot be downloaded here, so synthetic prompts are built from common English
words, which are one token each in the BPE vocabularies of current models. A real server's
``usage.prompt_tokens`` is recorded whenever it reports one. The simulator counts with this.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\u3000-\u303f\uff00-\uffef]|[A-Za-z0-9_']+|[^\sA-Za-z0-9_']")


def count_tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


def split_tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)

"""Load a quality set file: parse each line, check ids are unique and reference answers pass."""

from __future__ import annotations

from pathlib import Path

from tracker.errors import QualitySetError
from tracker.quality.scorers import score_output
from tracker.quality.sets import QualityItem, QualitySet, compute_set_version, parse_quality_item

MAX_SET_BYTES = 64 * 1024 * 1024  # GSM8K's 1,319 test items are about 1 MiB


def _read_lines(path: Path) -> list[str]:
    if not path.is_file():
        raise QualitySetError(f"{path}: quality set file not found; check quality.path (it is "
                              "relative to the suite file)")
    if path.stat().st_size > MAX_SET_BYTES:
        raise QualitySetError(f"{path}: {path.stat().st_size} bytes is over the "
                              f"{MAX_SET_BYTES // 2**20} MiB limit of a quality set; refused "
                              "(split the set, or sample it)")
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise QualitySetError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") \
            from None


def load_quality_set(path: str | Path) -> QualitySet:
    """Parse and check a JSONL quality set, in which every reference answer must pass its scorer."""
    file = Path(path)
    items: list[QualityItem] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(_read_lines(file), start=1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        where = f"{file}:{number}"
        item = parse_quality_item(line, where, number)
        if item.id in seen:
            raise QualitySetError(f"{where}: id {item.id!r} is already used on line "
                                  f"{seen[item.id]}; ids must be unique")
        seen[item.id] = number
        if item.answer is not None and score_output(item, item.answer) != 1.0:
            raise QualitySetError(f"{where}: answer {item.answer!r} does not pass its own "
                                  f"{item.scorer} scorer; fix the answer or the expected value")
        items.append(item)
    if not items:
        raise QualitySetError(f"{file}: the quality set has no items; add one JSON object a line")
    frozen = tuple(items)
    return QualitySet(file.stem, compute_set_version(frozen), str(file), frozen)

"""Write the larger shipped quality set, ``mixed-1k.jsonl``: 1,000 seeded items, one right answer
each, in the project's own words and numbers (no third-party text).

    .venv/bin/python baselines/quality/generate.py [--out DIR]     (default: this folder)

Every number is drawn from the tracker's ``SplitMix64`` seeded by ``SEED``, so running it twice
writes the same bytes (a test regenerates the file and compares it with this one). The items:

- 300 arithmetic (sums, differences, products of two or three numbers; ``numeric``);
- 200 unit conversions with exact integer answers (km to m, hours to minutes, ...; ``numeric``);
- 200 dates (the weekday of a date, the date some days later; ``exact``);
- 150 ordering (the largest or smallest of a list; a list sorted; ``numeric`` / ``exact``);
- 150 multiple choice (a prime, an even number, the largest sum among four; ``choice``).

Why 1,000: a paired test on this many items detects an accuracy drop of about 1 to 2 points at
80 % power (``bench/quality_power.py``); the 40 items of ``basic.jsonl`` detect about 16.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path

from tracker.inputs.prompts import SplitMix64, derive_seed

SEED = 20261201
NAME = "mixed-1k.jsonl"
HERE = Path(__file__).resolve().parent
NUMBER_ONLY = "Answer with the number only."
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
UNITS = (  # (from, to, factor)
    ("kilometres", "metres", 1000), ("metres", "centimetres", 100), ("hours", "minutes", 60),
    ("minutes", "seconds", 60), ("days", "hours", 24), ("kilograms", "grams", 1000),
    ("litres", "millilitres", 1000), ("feet", "inches", 12), ("weeks", "days", 7),
    ("tonnes", "kilograms", 1000),
)
Item = dict[str, object]


def between(rng: SplitMix64, low: int, high: int) -> int:
    return low + rng.below(high - low + 1)


def arithmetic(rng: SplitMix64) -> Item:
    kind = rng.below(4)
    a, b = between(rng, 11, 999), between(rng, 11, 999)
    if kind == 0:
        return {"prompt": f"What is {a} + {b}? {NUMBER_ONLY}", "expected": a + b}
    if kind == 1:
        return {"prompt": f"What is {a} - {b}? {NUMBER_ONLY}", "expected": a - b}
    if kind == 2:
        a, b = between(rng, 3, 99), between(rng, 3, 99)
        return {"prompt": f"What is {a} times {b}? {NUMBER_ONLY}", "expected": a * b}
    c = between(rng, 2, 9)
    return {"prompt": f"What is {a} + {b} * {c}? {NUMBER_ONLY}", "expected": a + b * c}


def conversion(rng: SplitMix64) -> Item:
    source, target, factor = UNITS[rng.below(len(UNITS))]
    amount = between(rng, 2, 250)
    return {"prompt": f"How many {target} are in {amount} {source}? {NUMBER_ONLY}",
            "expected": amount * factor}


def _day(rng: SplitMix64) -> date:
    return date(2020, 1, 1) + timedelta(days=rng.below(4000))


def dates(rng: SplitMix64) -> Item:
    day = _day(rng)
    if rng.below(2):
        return {"prompt": f"Which day of the week is {day.isoformat()}? Answer with the day's "
                          "name only.", "expected": WEEKDAYS[day.weekday()], "scorer": "exact"}
    later = between(rng, 2, 400)
    return {"prompt": f"Which date is {later} days after {day.isoformat()}? Answer as "
                      "YYYY-MM-DD only.",
            "expected": (day + timedelta(days=later)).isoformat(), "scorer": "exact"}


def ordering(rng: SplitMix64) -> Item:
    values: list[int] = []
    size = between(rng, 4, 6)
    while len(values) < size:
        value = between(rng, 1, 999)
        if value not in values:
            values.append(value)
    listed = ", ".join(map(str, values))
    kind = rng.below(3)
    if kind == 0:
        return {"prompt": f"Which is the largest of {listed}? {NUMBER_ONLY}",
                "expected": max(values)}
    if kind == 1:
        return {"prompt": f"Which is the smallest of {listed}? {NUMBER_ONLY}",
                "expected": min(values)}
    return {"prompt": f"Sort {listed} from smallest to largest. Answer with the numbers only, "
                      "separated by a comma and a space.",
            "expected": ", ".join(map(str, sorted(values))), "scorer": "exact"}


def _is_prime(value: int) -> bool:
    return value > 1 and all(value % d for d in range(2, int(value ** 0.5) + 1))


def _options(rng: SplitMix64, right: int, wrong: Callable[[], int]) -> tuple[list[int], str]:
    values = [right]
    while len(values) < 4:
        value = wrong()
        if value not in values:
            values.append(value)
    position = rng.below(4)
    values[0], values[position] = values[position], values[0]
    return values, "ABCD"[position]


def choice(rng: SplitMix64) -> Item:
    kind = rng.below(3)
    if kind == 0:
        primes = [v for v in range(11, 200) if _is_prime(v)]
        right = primes[rng.below(len(primes))]
        values, letter = _options(rng, right, lambda: 3 * between(rng, 3, 66))  # composite
        question = "Which of these is a prime number?"
    elif kind == 1:
        right = 2 * between(rng, 5, 499)
        values, letter = _options(rng, right, lambda: 2 * between(rng, 5, 499) + 1)
        question = "Which of these is an even number?"
    else:
        right = between(rng, 500, 999)
        values, letter = _options(rng, right, lambda: between(rng, 10, 499))
        question = "Which of these is the largest?"
    listed = " ".join(f"{'ABCD'[i]}. {v}" for i, v in enumerate(values))
    return {"prompt": f"{question} {listed}. Answer with the letter only.", "expected": letter,
            "scorer": "choice"}


PARTS: tuple[tuple[str, int, Callable[[SplitMix64], Item]], ...] = (
    ("arith", 300, arithmetic), ("unit", 200, conversion), ("date", 200, dates),
    ("order", 150, ordering), ("choice", 150, choice),
)


def build_items() -> list[Item]:
    items: list[Item] = []
    prompts: set[str] = set()
    for prefix, count, make in PARTS:
        rng = SplitMix64(derive_seed(SEED, prefix))
        while sum(1 for item in items if str(item["id"]).startswith(prefix)) < count:
            item = make(rng)
            if item["prompt"] in prompts:
                continue  # every prompt once: the simulator knows an item by its prompt
            prompts.add(str(item["prompt"]))
            number = sum(1 for i in items if str(i["id"]).startswith(prefix)) + 1
            items.append({"id": f"{prefix}-{number}", "prompt": item["prompt"],
                          "expected": item["expected"],
                          "scorer": item.get("scorer", "numeric")})
    return items


def render(items: list[Item]) -> str:
    header = [f"// Written by baselines/quality/generate.py (seed {SEED}); do not edit, rerun it.",
              "// The project's own items, one right answer each. Format: tracker/quality/sets.py."]
    lines = [json.dumps(item, ensure_ascii=False) for item in items]
    return "\n".join([*header, *lines]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / NAME).write_text(render(build_items()), encoding="utf-8")


if __name__ == "__main__":
    main()

"""YAML files are read within limits: a hostile file is one line and exit 2, at once."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tracker.cli.main import main
from tracker.errors import ConfigError
from tracker.inputs.configs import load_config
from tracker.inputs.yamlfile import (
    LOADERS,
    MAX_YAML_BYTES,
    MAX_YAML_DEPTH,
    MAX_YAML_NODES,
    YamlLimitError,
    parse_yaml,
    read_yaml_mapping,
)

ROOT = Path(__file__).resolve().parents[2]
GOOD_CONFIG = ROOT / "configs" / "sim-default.yaml"
GOOD_SUITE = ROOT / "baselines" / "chat-short.yaml"
GUARD_S = 10.0  # a generous guard against a hang; the measured times are well under a second

# The "billion laughs": nine levels of nine aliases expand to 9**9 strings.
LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def _write_text(text: str) -> Callable[[Path], None]:
    return lambda path: path.write_text(text, encoding="utf-8")


def _write_50_mb(path: Path) -> None:
    with path.open("wb") as file:
        file.write(b"name: x\ndescription: '")
        file.write(b"x" * (50 * 1024 * 1024))
        file.write(b"'\n")


HOSTILE: dict[str, tuple[Callable[[Path], None], str]] = {
    "alias bomb": (_write_text(LAUGHS), f"more than {MAX_YAML_NODES} values"),
    "10,000-deep list": (_write_text("a: " + "[" * 10_000 + "]" * 10_000 + "\n"),
                         f"deeper than {MAX_YAML_DEPTH} levels"),
    "10,000-deep mapping": (_write_text("a: " + "{a: " * 10_000 + "1" + "}" * 10_000 + "\n"),
                            f"deeper than {MAX_YAML_DEPTH} levels"),
    "recursive alias": (_write_text("a: &a [*a]\n"), "recursive alias"),
    "recursive merge key": (_write_text("a: &a {<<: *a}\n"), "recursive alias"),
    "50 MB file": (_write_50_mb, f"over the limit of {MAX_YAML_BYTES} bytes"),
}


def test_the_alias_bomb_is_the_small_one_from_the_issue() -> None:
    assert len(LAUGHS.encode()) < 500


@pytest.mark.parametrize("case", sorted(HOSTILE))
@pytest.mark.parametrize("command", ["run --config", "run --suite", "diff"])
def test_hostile_yaml_is_refused_in_one_line_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, command: str
) -> None:
    write, limit = HOSTILE[case]
    hostile = tmp_path / "hostile.yaml"
    write(hostile)
    db = ["--db", str(tmp_path / "t.db")]
    argv = {
        "run --config": ["run", "--config", str(hostile), "--suite", str(GOOD_SUITE), *db],
        "run --suite": ["run", "--config", str(GOOD_CONFIG), "--suite", str(hostile), *db],
        "diff": ["diff", str(GOOD_CONFIG), str(hostile)],
    }[command]
    started_s = time.monotonic()
    code = main(argv)
    elapsed_s = time.monotonic() - started_s
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith(f"error: {hostile}")
    assert limit in err
    assert elapsed_s < GUARD_S


@pytest.mark.parametrize("loader", LOADERS, ids=lambda loader: loader.__name__)
@pytest.mark.parametrize(("text", "problem"), [
    ("a: " + "[" * 200 + "]" * 200, "deeper than"),
    ("a: " + "{a: " * 200 + "1" + "}" * 200, "deeper than"),
    ("a: &a [*a]", "alias *a is inside its own anchor &a"),
    ("a: &a {b: [1, {c: *a}]}", "alias *a is inside its own anchor &a"),
    (LAUGHS, f"more than {MAX_YAML_NODES} values"),
    ("a: [" + ",".join(["1"] * (MAX_YAML_NODES + 1)) + "]", f"more than {MAX_YAML_NODES} values"),
])
def test_every_parser_keeps_the_limits(loader: type, text: str, problem: str) -> None:
    with pytest.raises(YamlLimitError) as info:
        parse_yaml(text, loader)
    assert problem in str(info.value)
    assert info.value.line is not None


def _depth(value: object) -> int:
    return 1 + max(map(_depth, value), default=0) if isinstance(value, list) else 0


@pytest.mark.parametrize("loader", LOADERS, ids=lambda loader: loader.__name__)
def test_aliases_nested_through_each_other_count_their_expanded_depth(loader: type) -> None:
    # each anchor one level deeper than the last: two levels as written, 40 once expanded
    lines = ["a0: &a0 [1]"] + [f"a{i}: &a{i} [*a{i - 1}]" for i in range(1, 40)]
    assert _depth(parse_yaml("\n".join(lines), loader)[1]["a39"]) == 40
    lines += ["b0: &b0 [*a39]"] + [f"b{i}: &b{i} [*a39, [*b{i - 1}]]" for i in range(1, 30)]
    with pytest.raises(YamlLimitError, match=f"deeper than {MAX_YAML_DEPTH} levels"):
        parse_yaml("\n".join(lines), loader)


@pytest.mark.parametrize("loader", LOADERS, ids=lambda loader: loader.__name__)
def test_ordinary_anchors_and_merge_keys_still_load(loader: type) -> None:
    text = "defaults: &d {concurrency: 4, max_tokens: 8}\nw: {<<: *d, max_tokens: 16}\n" \
           "both: [*d, *d]\n"
    data = parse_yaml(text, loader)[1]
    assert data["w"] == {"concurrency": 4, "max_tokens": 16}
    assert data["both"] == [{"concurrency": 4, "max_tokens": 8}] * 2


@pytest.mark.parametrize(("value", "problem"), [
    ("9" * 5000, "c.yaml:2: not a valid int"),
    ("2001-13-45", "c.yaml:2: not a valid timestamp (month must be in 1..12); quote it"),
])
def test_a_value_yaml_cannot_construct_is_a_config_error_with_its_line(
    tmp_path: Path, value: str, problem: str
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(f"name: x\nseed: {value}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        read_yaml_mapping(path, "suite")
    assert problem in str(info.value) and "\n" not in str(info.value)


def test_a_file_one_byte_over_the_limit_is_refused_and_one_at_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    head = "name: x\ndescription: '"
    path.write_text(head + "x" * (MAX_YAML_BYTES - len(head) - 2) + "'\n", encoding="utf-8")
    assert len(read_yaml_mapping(path, "suite")[0]["description"]) > 1000
    path.write_text(head + "x" * (MAX_YAML_BYTES - len(head) - 1) + "'\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=f"{MAX_YAML_BYTES + 1} bytes, over the limit"):
        read_yaml_mapping(path, "suite")


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero on this system")
def test_an_endless_file_is_read_only_up_to_the_limit() -> None:
    started_s = time.monotonic()
    with pytest.raises(ConfigError, match=f"holds more than {MAX_YAML_BYTES} bytes"):
        load_config("/dev/zero")
    assert time.monotonic() - started_s < GUARD_S


def test_line_endings_are_read_as_before(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(b"name: x\r\nseed: 3\r\nnotes: |\r\n  a\r\n  b\r\n")
    data, lines = read_yaml_mapping(path, "suite")
    assert data == {"name": "x", "seed": 3, "notes": "a\nb\n"}
    assert lines[("seed",)] == 2

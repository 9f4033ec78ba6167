"""docs/cli.md is the parser rendered: every command, its usage, each argument's help and default."""

from __future__ import annotations

import argparse
from pathlib import Path

from tracker.cli.parsers import build_parser
from tracker.cli.reference import REGENERATE, iter_commands, main, render_command, render_reference

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "cli.md"


def test_docs_cli_md_is_the_freshly_rendered_reference() -> None:
    rendered = render_reference()
    page = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
    assert page == rendered, (f"docs/cli.md is not the parser's reference: regenerate it with "
                              f"`{REGENERATE}` from the repository root")


def test_reference_has_a_section_for_every_command() -> None:
    rendered = render_reference()
    words = [" ".join(path) for path, _, _ in iter_commands(build_parser())]
    assert {"run", "gate", "bisect", "db upgrade", "schedule run-now", "sim serve"} <= set(words)
    for command in words:
        assert f"\n## `tracker {command}`\n" in rendered


def _toy() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tracker")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    toy = sub.add_parser("toy", help="do a toy thing | safely")
    toy.add_argument("name", metavar="NAME")
    toy.add_argument("--config", required=True, metavar="FILE", help="serving config YAML")
    rounds = toy.add_mutually_exclusive_group()
    rounds.add_argument("--max-rounds", type=int, metavar="M", help="at most M")
    rounds.add_argument("--repeats", type=int, metavar="N", help="exactly N")
    toy.add_argument("--grace-s", type=float, default=30.0, help="grace (default: %(default)g)")
    toy.add_argument("--kind", choices=("a", "b"), default="a")
    toy.add_argument("--label", action="append", default=[], metavar="K=V", help="a <label>")
    toy.add_argument("--quiet", action="store_true", help="no progress display")
    return parser


def test_a_command_renders_usage_defaults_and_help_as_argparse_means_them() -> None:
    [(words, summary, toy)] = list(iter_commands(_toy()))
    assert render_command(words, summary, toy).splitlines() == [
        "## `tracker toy`",
        "",
        "Do a toy thing \\| safely.",
        "",
        "```",
        "tracker toy --config FILE [--max-rounds M | --repeats N] [--grace-s GRACE_S] [--kind {a,b}]",
        "            [--label K=V] [--quiet] NAME",
        "```",
        "",
        "| argument | default | what |",
        "|---|---|---|",
        "| `NAME` |  |  |",
        "| `--config FILE` | required | serving config YAML |",
        "| `--max-rounds M` |  | at most M |",
        "| `--repeats N` |  | exactly N |",
        "| `--grace-s GRACE_S` | `30` | grace (default: 30) |",
        "| `--kind {a,b}` | `a` |  |",
        "| `--label K=V` |  | a &lt;label&gt; Repeatable. |",
        "| `--quiet` |  | no progress display |",
    ]


def test_main_writes_the_page_it_renders(tmp_path: Path) -> None:
    out = tmp_path / "cli.md"
    assert main(["--write", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == render_reference()


def test_an_argument_many_commands_share_is_described_once() -> None:
    parser = argparse.ArgumentParser(prog="tracker")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in ("one", "two", "three"):
        command = sub.add_parser(name, help=f"the {name} command")
        command.add_argument("--db", metavar="URL",
                             help="database URL or SQLite file (default: ./tracker.db)")
        if name != "three":
            command.add_argument("--labels", metavar="K=V", default="none",
                                 help="what this runner offers, e.g. gpu=h100, and more words")
    page = render_reference(parser)
    assert "## Shared arguments" in page
    assert page.count("database URL or SQLite file") == 1
    assert page.count("| `--db URL` |  | [shared](#shared-arguments) |") == 3
    assert page.count("what this runner offers") == 1
    assert "| `--labels K=V` | `none` | as in [`tracker one`](#tracker-one) |" in page

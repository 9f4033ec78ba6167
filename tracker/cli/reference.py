"""The command-line reference (docs/cli.md), rendered from the parser itself.

``python -m tracker.cli.reference --write docs/cli.md`` regenerates the page. Without
``--write`` the Markdown goes to stdout. ``tests/cli/test_cli_reference.py`` fails when the page
and the parser disagree. The usage lines are built here from the parser's actions, not by
argparse's formatter, so the page does not change with the terminal's width or Python's version.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from tracker.cli.parsers import build_parser

USAGE_WIDTH = 100
SHARED_AFTER = 3  # an argument this many commands take alike is described once
SHARED_LINK = "[shared](#shared-arguments)"
POINTER_SAVES = 10  # a help repeated elsewhere becomes a link when that saves this many characters
REGENERATE = ".venv/bin/python -m tracker.cli.reference --write docs/cli.md"
HEADER = f"""# Command-line reference

Every command, its usage and its arguments, generated from the parser (`tracker/cli/parsers.py`).
Do not edit this page by hand: regenerate it with

```sh
{REGENERATE}
```

`tests/cli/test_cli_reference.py` fails when the page and the parser disagree. Every command also
takes `-h` / `--help`. What each command does, and why, is in the topic pages
([index.md](index.md)).
"""


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[
        argparse.ArgumentParser] | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def iter_commands(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()
                  ) -> Iterator[tuple[tuple[str, ...], str, argparse.ArgumentParser]]:
    """Every command that runs something, depth first in the parser's order: its words after
    ``tracker`` (``("schedule", "add")``), its one-line help and its parser."""
    sub = _subparsers(parser)
    if sub is None:
        return
    helps = {choice.dest: choice.help or "" for choice in sub._choices_actions}
    for name, child in sub.choices.items():
        path = (*words, name)
        if _subparsers(child) is None:
            yield path, helps.get(name, ""), child
        else:
            yield from iter_commands(child, path)


def _shown(action: argparse.Action) -> bool:
    return action.help != argparse.SUPPRESS and not isinstance(
        action, (argparse._HelpAction, argparse._SubParsersAction))


def _metavar(action: argparse.Action) -> str:
    if action.metavar is not None:
        return str(action.metavar)
    if action.choices is not None:
        return "{" + ",".join(str(choice) for choice in action.choices) + "}"
    return action.dest.upper() if action.option_strings else action.dest


def render_invocation(action: argparse.Action) -> str:
    """``--config FILE``, ``--goodput KEY:MS [KEY:MS ...]``, ``--quiet``, ``[NAME]``."""
    metavar = _metavar(action)
    if action.nargs == 0:
        args = ""
    elif action.nargs == "?":
        args = f"[{metavar}]"
    elif action.nargs == "*":
        args = f"[{metavar} ...]"
    elif action.nargs == "+":
        args = f"{metavar} [{metavar} ...]"
    elif isinstance(action.nargs, int):
        args = " ".join([metavar] * action.nargs)
    else:
        args = metavar
    if not action.option_strings:
        return args
    return " ".join(part for part in (", ".join(action.option_strings), args) if part)


def _usage_part(action: argparse.Action) -> str:
    text = render_invocation(action)
    if action.option_strings:
        text = text.replace(", ", " | ")
    return text if action.required or not action.option_strings else f"[{text}]"


def render_usage(prog: str, parser: argparse.ArgumentParser) -> str:
    """One usage line: options first (a mutually exclusive group as ``[A | B]``), then the
    positionals, like argparse's own but the same on every terminal and Python."""
    groups = {id(action): group for group in parser._mutually_exclusive_groups
              for action in group._group_actions}
    parts: list[str] = []
    done: set[int] = set()
    actions = [a for a in parser._actions if _shown(a)]
    for action in [a for a in actions if a.option_strings]:
        group = groups.get(id(action))
        if group is None:
            parts.append(_usage_part(action))
        elif id(group) not in done:
            done.add(id(group))
            inner = " | ".join(render_invocation(a) for a in group._group_actions if _shown(a))
            parts.append(f"({inner})" if group.required else f"[{inner}]")
    parts += [_usage_part(a) for a in actions if not a.option_strings]
    return _wrap(prog, parts)


def _wrap(prog: str, parts: list[str], width: int = USAGE_WIDTH) -> str:
    """``prog`` and its parts on lines of at most ``width`` characters where a part allows,
    continuation lines indented under the first part."""
    indent = " " * (len(prog) + 1)
    lines = [prog]
    for part in parts:
        if len(lines[-1]) + 1 + len(part) > width and lines[-1].strip() not in ("", prog):
            lines.append(indent + part)
        else:
            lines[-1] += " " + part
    return "\n".join(lines)


def _escape(text: str) -> str:
    """Help text is prose for a terminal, so it is shown as text in a Markdown table cell."""
    return (text.replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*")
            .replace("<", "&lt;").replace(">", "&gt;").replace("\n", " "))


def _help(action: argparse.Action, prog: str) -> str:
    """The help as ``--help`` prints it: ``%(default)s`` and friends filled in."""
    text = action.help or ""
    if "%" in text:
        params = {k: v for k, v in vars(action).items() if v is not argparse.SUPPRESS}
        if params.get("choices") is not None:
            params["choices"] = ", ".join(str(choice) for choice in params["choices"])
        text = text % {**params, "prog": prog}
    return " ".join(text.split())


def _default(action: argparse.Action) -> str:
    default = action.default
    if action.nargs == 0 or default is None or default is argparse.SUPPRESS or default == []:
        return ""
    return f"`{default:g}`" if isinstance(default, float) else f"`{default}`"


def _row(action: argparse.Action, prog: str) -> tuple[str, str, str]:
    """An argument's table cells: how it is written, its default (or "required"), its help."""
    what = _escape(_help(action, prog))
    if isinstance(action, (argparse._AppendAction, argparse._AppendConstAction)):
        what = f"{what} Repeatable.".strip()
    if action.choices is not None and action.metavar is not None:
        choices = ", ".join(f"`{choice}`" for choice in action.choices)
        what = f"{what} One of {choices}.".strip()
    default = "required" if action.required and action.option_strings else _default(action)
    return f"`{render_invocation(action)}`", default, what


def _table(rows: list[tuple[str, str, str]]) -> list[str]:
    return ["| argument | default | what |", "|---|---|---|",
            *(f"| {name} | {default} | {what} |" for name, default, what in rows), ""]


def _anchor(prog: str) -> str:
    """GitHub's anchor of a ``## `tracker …``` heading."""
    return "".join(c for c in prog.lower().replace(" ", "-") if c.isalnum() or c in "-_")


def render_command(words: tuple[str, ...], summary: str, parser: argparse.ArgumentParser,
                   seen: dict[tuple[str, str, str], str] | None = None) -> str:
    """One command's section: its help, its usage and a table of its arguments. An argument
    described before (``seen``: row → a link to where) points there when the link is much
    shorter than its help. The others are added to ``seen`` as described here."""
    seen = {} if seen is None else seen
    prog = " ".join(("tracker", *words))
    lines = [f"## `{prog}`", ""]
    if summary:
        sentence = _escape(" ".join(summary.split())).rstrip(".")
        lines += [sentence[:1].upper() + sentence[1:] + ".", ""]
    lines += ["```", render_usage(prog, parser), "```", ""]
    rows = []
    for action in [a for a in parser._actions if _shown(a)]:
        name, default, what = row = _row(action, prog)
        earlier = seen.get(row)
        if earlier is None:
            seen[row] = f"as in [`{prog}`](#{_anchor(prog)})"
        elif len(what) > len(earlier) + POINTER_SAVES:
            what = earlier
        rows.append((name, default, what))
    if rows:
        lines += _table(rows)
    return "\n".join(lines)


def render_reference(parser: argparse.ArgumentParser | None = None) -> str:
    """docs/cli.md: the header, the list of commands, the arguments many commands share, then
    one section per command. A long help that several commands repeat is written out once."""
    parser = parser or build_parser()
    commands = list(iter_commands(parser))
    index = [f"[`{' '.join(words)}`](#{_anchor(' '.join(('tracker', *words)))})"
             for words, _, _ in commands]
    uses = Counter(row for words, _, child in commands for row in {
        _row(action, " ".join(("tracker", *words))) for action in child._actions
        if _shown(action)})
    shared = sorted(row for row, count in uses.items() if count >= SHARED_AFTER)
    top = f"{render_usage('tracker', parser)} COMMAND ..."
    lines = [HEADER, "```", top, "```", "", "Commands: " + ", ".join(index) + ".", ""]
    if shared:
        lines += ["## Shared arguments", "",
                  f"Arguments that {SHARED_AFTER} or more commands take with the same meaning.", "",
                  *_table(shared)]
    seen = dict.fromkeys(shared, SHARED_LINK)
    lines += [render_command(words, summary, child, seen) for words, summary, child in commands]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(prog="python -m tracker.cli.reference",
                                  description="Render the command-line reference as Markdown.")
    cli.add_argument("--write", metavar="FILE", type=Path,
                     help="write it to FILE (e.g. docs/cli.md) instead of stdout")
    args = cli.parse_args(argv)
    text = render_reference()
    if args.write is None:
        sys.stdout.write(text)
    else:
        args.write.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

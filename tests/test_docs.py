"""The docs stay a reference one can find things in: every package has its section in
docs/architecture.md, no page grows past 20 KB, and no relative link points nowhere.

Links are checked as GitHub renders them: a relative path must exist, and an anchor must be the
GitHub slug of a heading of the page it points at (lower case, punctuation dropped, each space a
hyphen, ``-1``, ``-2`` … for repeats).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MAX_PAGE_BYTES = 20_000
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"(`+).*?\1")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md")), *sorted((ROOT / "bench").glob("*.md"))]


def _prose(path: Path) -> Iterator[tuple[int, str]]:
    """The page's lines outside fenced code blocks, with their numbers."""
    fence = ""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        stripped = line.lstrip()
        if fence:
            if stripped.startswith(fence):
                fence = ""
            continue
        if stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
            continue
        yield number, line


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text (github-slugger): Markdown marks and punctuation
    dropped, letters lower-cased, each space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays
    text = text.replace("`", "").lower()
    kept = (c for c in text if c.isalnum() or c in "-_ " or unicodedata.category(c).startswith("M"))
    return "".join(kept).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in _prose(path):
        match = HEADING.match(line)
        if match is None:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def relative_links(path: Path) -> Iterator[tuple[int, str]]:
    for number, line in _prose(path):
        for match in LINK.finditer(INLINE_CODE.sub("", line)):
            target = match.group(1)
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, mailto:
                yield number, target


def _broken(page: Path, target: str) -> str | None:
    file_part, _, anchor = target.partition("#")
    dest = (page.parent / file_part).resolve() if file_part else page
    if not dest.exists():
        return f"{file_part} does not exist"
    if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
        return f"{dest.name} has no heading whose anchor is #{anchor}"
    return None


def test_every_relative_link_in_the_docs_reaches_a_file_and_heading() -> None:
    problems = [f"{page.relative_to(ROOT)}:{number}: ({target}): {why}"
                for page in _pages() for number, target in relative_links(page)
                if (why := _broken(page, target)) is not None]
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_no_docs_page_is_over_20_kb() -> None:
    sizes = {page.name: page.stat().st_size for page in sorted(DOCS.glob("*.md"))}
    over = {name: size for name, size in sizes.items() if size > MAX_PAGE_BYTES}
    assert not over, (f"docs pages over {MAX_PAGE_BYTES:,} bytes: {over}; split each by job or "
                      "concept, and move measurement logs next to their bench script (bench/NAME.md)")


def test_architecture_has_a_section_for_every_package() -> None:
    headings = [line for _, line in _prose(DOCS / "architecture.md") if HEADING.match(line)]
    packages = sorted(p.name for p in (ROOT / "tracker").iterdir()
                      if p.is_dir() and (p / "__init__.py").exists())
    missing = [name for name in packages
               if not any(f"`tracker/{name}/`" in heading for heading in headings)]
    assert not missing, (f"docs/architecture.md has no section for {missing}: add a heading "
                         "'## `tracker/NAME/`: …' saying what it is, its stage and its modules")


def test_architecture_names_every_module_in_its_package_section() -> None:
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    sections = dict(re.findall(r"^## `tracker/(\w+)/`[^\n]*\n(.*?)(?=^## |\Z)", text,
                               re.MULTILINE | re.DOTALL))
    missing = [f"{package.name}/{module.name}"
               for package in sorted((ROOT / "tracker").iterdir())
               if package.is_dir() and (package / "__init__.py").exists()
               for module in sorted(package.glob("*.py"))
               if module.name != "__init__.py"
               and f"`{module.name}`" not in sections.get(package.name, "")]
    assert not missing, (f"docs/architecture.md does not name {missing} in its package's "
                         "section: add a line saying what each module is")


def test_the_readme_stays_a_front_door() -> None:
    assert (ROOT / "README.md").stat().st_size <= 8 * 1024


@pytest.mark.parametrize(("heading", "expected"), [
    ("`tracker diff A B`", "tracker-diff-a-b"),
    ("The launched server's environment: `env` and `env_from`",
     "the-launched-servers-environment-env-and-env_from"),
    ("Pinning: the server's CPUs and the client's (`launch.cpus`)",
     "pinning-the-servers-cpus-and-the-clients-launchcpus"),
    ("Start — then more", "start--then-more"),
])
def test_slug_is_githubs(heading: str, expected: str) -> None:
    assert slug(heading) == expected


def test_a_link_to_a_missing_heading_is_reported(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Page\n\n## Real one\n\n```sh\n# not a heading\n```\n", encoding="utf-8")
    assert _broken(page, "#real-one") is None
    assert _broken(page, "#not-a-heading") is not None
    assert _broken(page, "missing.md") == "missing.md does not exist"

"""Reading the Markdown of docs/ and README.md as the docs tests need it: sections by heading, the first column of
tables, code (fenced blocks and inline spans), and the anchors mkdocs gives headings."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

_FENCE = re.compile(r"^(```|~~~)[^\n]*\n(.*?)^\1[ \t]*$", re.S | re.M)
_SPAN = re.compile(r"`([^`\n]+)`")
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.M)


def markdown_files() -> list[Path]:
    """Every page of the site, and the README."""
    return sorted(DOCS.rglob("*.md")) + [ROOT / "README.md"]


def code_of(text: str) -> list[str]:
    """The fenced blocks' lines and the inline code spans outside them: where commands are written."""
    blocks = [line for match in _FENCE.finditer(text) for line in match.group(2).splitlines()]
    return blocks + _SPAN.findall(_FENCE.sub("", text))


def without_code(text: str) -> str:
    return _FENCE.sub("", text)


def section(text: str, title: str) -> str:
    """The text under the heading `title` (any level) up to the next heading of the same or a higher level."""
    headings = list(_HEADING.finditer(without_code(text)))
    body = without_code(text)
    for i, match in enumerate(headings):
        if match.group(2) == title:
            level = len(match.group(1))
            end = next((h.start() for h in headings[i + 1 :] if len(h.group(1)) <= level), len(body))
            return body[match.end() : end]
    raise AssertionError(f"no heading {title!r}")


def subsections(text: str, level: int) -> dict[str, str]:
    """Each heading of `level` in `text`, with its text up to the next heading of that level or higher."""
    headings = [h for h in _HEADING.finditer(text) if len(h.group(1)) <= level]
    return {
        h.group(2): text[h.end() : headings[i + 1].start() if i + 1 < len(headings) else len(text)]
        for i, h in enumerate(headings)
        if len(h.group(1)) == level
    }


def first_column(text: str) -> list[str]:
    """The code span of each table row's first cell (header and rule rows have none)."""
    cells = [line.split("|")[1].strip() for line in text.splitlines() if line.lstrip().startswith("|")]
    return [span for cell in cells for span in _SPAN.findall(cell)[:1]]


def slug(title: str) -> str:
    """The anchor mkdocs' toc extension gives a heading: code marks and punctuation dropped, lowercase, spaces as
    hyphens."""
    text = re.sub(r"[^\w\s-]", "", title.replace("`", "")).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path: Path) -> set[str]:
    """The anchors of a page's headings (mkdocs numbers a repeated one: -1, -2...)."""
    seen: dict[str, int] = {}
    result = set()
    for match in _HEADING.finditer(without_code(path.read_text())):
        base = slug(match.group(2))
        count = seen.get(base, 0)
        result.add(base if count == 0 else f"{base}_{count}")
        seen[base] = count + 1
    return result

"""Every link of README.md and docs/*.md resolves: a relative link names a file or folder of
the repository, and a `#fragment` names a heading of the page it points at, spelled as
GitHub spells heading anchors (lower case; punctuation other than `-` and `_` dropped; each
space a `-`; a repeated heading gets `-1`, `-2`, ...; inline markup reduced to its text).

Links are `[text](target)` and `![alt](target)` outside code, and reference definitions
`[label]: target`. Web links (`http(s)://`, `mailto:`) are left to the reader: the tests run
without a network."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
WEB = ("http://", "https://", "mailto:")


@dataclass(frozen=True)
class Link:
    page: Path
    line: int
    target: str

    @property
    def label(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}: {self.target}"


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code, with inline code spans blanked."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            out.append((number, re.sub(r"(`+)(.+?)\1", lambda m: " " * len(m.group(0)), line)))
    return out


def links_of(page: Path) -> list[Link]:
    found = []
    for number, line in prose_lines(page.read_text(encoding="utf-8")):
        targets = [m.group(1) for m in INLINE.finditer(line)]
        definition = DEFINITION.match(line)
        if definition:
            targets.append(definition.group(1))
        found += [Link(page, number, t) for t in targets]
    return found


def heading_text(markdown: str) -> str:
    """A heading as GitHub renders it to text: code spans, emphasis, links and images
    reduced to their text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    text = re.sub(r"(`+)(.+?)\1", r"\2", text)
    text = re.sub(r"(\*\*|__|\*|_)(?=\S)(.+?)(?<=\S)\1", r"\2", text)
    return re.sub(r"<[^>]+>", "", text)


def slug(text: str) -> str:
    """GitHub's anchor of one heading text (github-slugger, without the repeat suffix)."""
    kept = []
    for char in text.lower():
        category = unicodedata.category(char)
        if char in " -_" or category[0] in "LNM":
            kept.append(char)
    return "".join(kept).replace(" ", "-")


def anchors_of(page: Path) -> set[str]:
    """Every anchor GitHub gives the page: its headings, repeats numbered, and HTML anchors."""
    seen: dict[str, int] = {}
    anchors = set()
    text = page.read_text(encoding="utf-8")
    for _, line in _heading_lines(text):
        base = slug(heading_text(line))
        count = seen.get(base, 0)
        seen[base] = count + 1
        anchors.add(base if count == 0 else f"{base}-{count}")
    anchors |= set(HTML_ANCHOR.findall(text))
    return anchors


def _heading_lines(text: str) -> list[tuple[int, str]]:
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        match = HEADING.match(line)
        if match and not fenced:
            out.append((number, match.group(2)))
    return out


def problem(link: Link, root: Path = ROOT) -> str | None:
    """Why the link does not resolve, or None."""
    target = link.target
    if target.startswith(WEB):
        return None
    path_part, _, fragment = target.partition("#")
    if "://" in path_part:
        return f"a link with scheme {path_part.split('://')[0]!r} is not checked here"
    destination = (link.page.parent / path_part).resolve() if path_part else link.page
    if not destination.is_relative_to(root.resolve()):
        return "points outside the repository"
    if not destination.exists():
        return f"no file {path_part}"
    if fragment:
        if destination.suffix != ".md":
            return f"#{fragment} on a file that is not Markdown"
        if fragment not in anchors_of(destination):
            return f"no heading #{fragment} in {destination.relative_to(root.resolve())}"
    return None


LINKS = [link for page in PAGES for link in links_of(page)]


def test_the_pages_have_links() -> None:
    """README.md links every page of docs/, so every page is reachable from the front door."""
    readme = {(ROOT / link.target.partition("#")[0]).resolve()
              for link in LINKS if link.page.name == "README.md"}  # fmt: skip
    unlinked = [p.name for p in PAGES[1:] if p.resolve() not in readme]
    assert not unlinked, f"pages the README does not link: {unlinked}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(page: Path) -> None:
    broken = [f"{link.label}: {why}" for link in links_of(page) if (why := problem(link))]
    assert not broken, "\n".join(broken)


# --------------------------------------------------------------------------- the checker


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Quick start", "quick-start"),
        ("Compiling models: `lossgrad-compile`", "compiling-models-lossgrad-compile"),
        ("The core split (the tiling function)", "the-core-split-the-tiling-function"),
        ("The tile length (`ascendc-plan-buffers`)", "the-tile-length-ascendc-plan-buffers"),
        ("CANN's kernels", "canns-kernels"),
        ("lossgrad-opt and xdsl-opt", "lossgrad-opt-and-xdsl-opt"),
        ("What it proves, and what it leaves", "what-it-proves-and-what-it-leaves"),
        ("Fusion (benchmarks/bench_fuse.py)", "fusion-benchmarksbench_fusepy"),
        ("**Bold** and [a link](x.md)", "bold-and-a-link"),
        ("Ascend C → AscendNPU IR × 2", "ascend-c--ascendnpu-ir--2"),
        ("The SoC table", "the-soc-table"),
    ],
)
def test_slugs_follow_github(heading: str, anchor: str) -> None:
    assert slug(heading_text(heading)) == anchor


def test_the_checker_finds_broken_links(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "a.md"
    (tmp_path / "docs" / "b.md").write_text("# Title\n\n## Part\n\n## Part\n")
    page.write_text(
        "# A\n\n## Here\n\n"
        "[ok](b.md) [ok](b.md#part-1) [ok](#here) [ok](../docs) [web](https://example.com)\n"
        "[missing](c.md) [no anchor](b.md#part-2) [self](#there) [up](../../outside.md)\n"
        "`[in code](c.md)`\n\n```\n[in a fence](c.md)\n```\n\n[ref]: b.md#nowhere\n"
    )
    found = {link.target: problem(link, tmp_path) for link in links_of(page)}
    assert found == {
        "b.md": None,
        "b.md#part-1": None,
        "#here": None,
        "../docs": None,
        "https://example.com": None,
        "c.md": "no file c.md",
        "b.md#part-2": "no heading #part-2 in docs/b.md",
        "#there": "no heading #there in docs/a.md",
        "../../outside.md": "points outside the repository",
        "b.md#nowhere": "no heading #nowhere in docs/b.md",
    }

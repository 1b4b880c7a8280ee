"""The repository stands on its own: no file cites a document outside it (the contract is
docs/operators.md, level 2 is docs/level2.md, the Ascend C rules are docs/ascend-c.md) or a
path of the machine it was written on."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The names are spelled in parts so that this file does not cite them itself.
SHARED, MD = "shared", r"\.md"
OUTSIDE_DOCUMENTS = re.compile(
    rf"SPEC{MD}|DESIGN{MD}|{SHARED}/reference|\.\./{SHARED}|reference/[\w-]+{MD}"
)
MACHINE_PATHS = re.compile(r"(?<![\w.$}\"'])/(?:home|Users|root|work|tmp/[A-Za-z])/")


def tracked_text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    files = []
    for name in listed:
        path = ROOT / name
        if not path.is_file():
            continue
        try:
            path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        files.append(path)
    return files


def hits(pattern: re.Pattern[str]) -> list[str]:
    found = []
    for path in tracked_text_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    return found


def test_no_citation_of_a_document_outside_the_repository() -> None:
    assert hits(OUTSIDE_DOCUMENTS) == []


def test_no_path_of_a_build_machine() -> None:
    assert hits(MACHINE_PATHS) == []


def test_the_patterns_find_what_they_look_for() -> None:
    md, slash = ".md", "/"
    assert OUTSIDE_DOCUMENTS.search(f"the contract is SPEC{md}")
    assert OUTSIDE_DOCUMENTS.search(f"see ../{SHARED}/notes")
    assert OUTSIDE_DOCUMENTS.search(f"see reference/ascend-c{md} §3")
    assert MACHINE_PATHS.search(f"// from {slash}home/dev/cann/include")
    assert MACHINE_PATHS.search(f"# {slash}work/{SHARED}/x")
    assert not MACHINE_PATHS.search('cp "$WORK"/root/usr/include')

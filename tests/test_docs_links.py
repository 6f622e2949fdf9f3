"""The user docs' links hold: every relative link in README.md, CHANGELOG.md and docs/*.md names a file of the
repository, and every #anchor a heading of the linked Markdown file (GitHub's heading slugs); every path the
README tells a user to run with (``data/samples/...``, ``conf/...``) exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO

DOCS = [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", flags=re.S | re.M)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, flags=re.M)}


def test_slug_follows_github() -> None:
    assert slug("5. `decide`: leader operations on one snapshot, as JSON") == \
        "5-decide-leader-operations-on-one-snapshot-as-json"
    assert slug("Audit: what the leader did") == "audit-what-the-leader-did"
    assert slug("broker_load") == "broker_load"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_and_anchors_resolve(doc: Path) -> None:
    text = FENCE.sub("", doc.read_text(encoding="utf-8"))
    broken = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target):
            continue  # http(s), mailto: not checked offline
        file_part, _, anchor = target.partition("#")
        path = (doc.parent / file_part).resolve() if file_part else doc
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target}: no heading #{anchor} in {path.relative_to(REPO)}")
    assert not broken, broken


def test_paths_the_readme_names_exist() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    paths = set(re.findall(r"(?<![\w/])((?:data/samples|conf|airflow|jobs)/[\w./-]+\w)", text))
    assert "data/samples/decide/threshold-shedder.json" in paths
    missing = sorted(p for p in paths if not (REPO / p).exists())
    assert not missing, missing

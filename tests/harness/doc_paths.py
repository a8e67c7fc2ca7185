"""Every path and link the README and docs/*.md name must exist, so the feature table's "the
test that proves it" cannot point at a test that moved or went away.

- test paths (`tests/...`, or relative to tests/: `unit/...`, `actor/...`, `sim/...`,
  `system/...`, `analysis/test_*`), with `::name` node ids, including the `, ::name` shorthand
  that continues the file before it: the file must exist and define `name`;
- bare `test_*.py` names (no folder): must name exactly one file under tests/;
- product paths in backticks (`actors/...`, `storage/...`, `protocol/...`, `cli/...`,
  `analysis/...`, `bench/...`, `deploy/...`, `.ci/...`): must exist;
- markdown links to local files (and their #anchors, GitHub-style): must resolve.
"""

from __future__ import annotations

import re
from pathlib import Path

TEST_TOPS = ("unit/", "actor/", "sim/", "system/", "harness/", "golden/")
PRODUCT_TOPS = (
    "actors/",
    "storage/",
    "protocol/",
    "cli/",
    "analysis/",
    "bench/",
    "deploy/",
    ".ci/",
)
GENERATED = ("tests/artifacts",)  # written by test runs, not in git
NOT_PATHS = {"tests/dev"}  # prose: "tests/dev only"

PATH_RE = re.compile(
    r"(?<![\w/.-])((?:tests/)?[\w.-]+(?:/[\w.*-]+)+/?|test_[\w]+\.py)"  # a path
    r"((?:::[\w\[\]-]+)?)"  # an optional ::node id
)
CONT_RE = re.compile(r"(?<![\w/])::(test_\w+|Test\w+)")
LINK_RE = re.compile(r"\]\(([^)\s]+)\)")


def slug(h: str) -> str:
    h = h.strip().lower()
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(md: Path) -> set[str]:
    out, fence = set(), False
    for line in md.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        if not fence and line.startswith("#"):
            out.add(slug(line.lstrip("#")))
    return out


def defines(path: Path, name: str) -> re.Match[str] | None:
    name = name.split("[")[0]
    return re.search(
        rf"^\s*(?:async\s+def|def|class)\s+{re.escape(name)}\b", path.read_text(), re.M
    )


def classify(repo: Path, tok: str) -> Path | None:
    """-> Path to check (or None when the token is not a repository path)."""
    t = tok.rstrip("/")
    if t.startswith("tests/"):
        return repo / t
    if t.startswith(TEST_TOPS) or (t.startswith("analysis/") and Path(t).name.startswith("test_")):
        return repo / "tests" / t
    if t.startswith(PRODUCT_TOPS):
        return repo / t
    return None


def doc_problems(repo: Path) -> tuple[list[str], dict[str, int]]:
    """The problems found (empty: every path and link resolves) and how much was checked."""
    docs = [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]
    test_files = list((repo / "tests").rglob("*.py"))
    problems: list[str] = []
    checked = {"files": 0, "nodes": 0, "links": 0}
    for doc in docs:
        rel = doc.relative_to(repo)
        for lineno, line in enumerate(doc.read_text().splitlines(), 1):
            # links
            for target in LINK_RE.findall(line):
                if target.startswith(("http://", "https://", "mailto:")):
                    continue
                file, _, anchor = target.partition("#")
                dest = (doc.parent / file).resolve() if file else doc
                checked["links"] += 1
                if not dest.exists():
                    problems.append(f"{rel}:{lineno}: link to missing {target}")
                elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                    problems.append(f"{rel}:{lineno}: link {target}: no such heading")
            # paths, in order, so a `::name` continuation follows its file
            events = [(m.start(), "p", m) for m in PATH_RE.finditer(line)]
            events += [(m.start(), "c", m) for m in CONT_RE.finditer(line)]
            last = None
            for _, kind, m in sorted(events, key=lambda e: e[0]):
                if kind == "p":
                    tok, node = m.group(1), m.group(2).removeprefix("::")
                    if (
                        tok.startswith(("http", "../shared", "www."))
                        or "://" in line[max(0, m.start() - 8) : m.start()]
                    ):
                        continue
                    if "/" not in tok:  # bare test_x.py
                        hits = [p for p in test_files if p.name == tok]
                        checked["files"] += 1
                        if len(hits) != 1:
                            problems.append(
                                f"{rel}:{lineno}: bare {tok}: {len(hits)} files of that name"
                            )
                            last = None
                            continue
                        path = hits[0]
                    else:
                        path = classify(repo, tok)
                        if path is None or tok in NOT_PATHS:
                            continue
                        if any(str(path).startswith(str(repo / g)) for g in GENERATED):
                            continue
                        if "*" in tok:
                            checked["files"] += 1
                            if not list(repo.glob(str(path.relative_to(repo)))):
                                problems.append(f"{rel}:{lineno}: no file matches {tok}")
                            continue
                        checked["files"] += 1
                        if not path.exists():
                            problems.append(f"{rel}:{lineno}: missing {tok}")
                            last = None
                            continue
                    last = path if path.suffix == ".py" else None
                    if node:
                        checked["nodes"] += 1
                        if not defines(path, node):
                            problems.append(f"{rel}:{lineno}: {tok} has no {node}")
                else:
                    name = m.group(1)
                    if last is None or not last.name.startswith("test_"):
                        continue  # e.g. a function of product code after a product path
                    checked["nodes"] += 1
                    if not defines(last, name):
                        problems.append(f"{rel}:{lineno}: {last.relative_to(repo)} has no {name}")

    return problems, checked

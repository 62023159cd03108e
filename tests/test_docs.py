"""The README and docs/ as a reader meets them: every relative link leads to a file (and to a heading, when
it names one, by GitHub's anchor rules), every docs page is reachable from the README, and the README stays
short enough to read in a few minutes."""

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README_LIMIT = 15_000  # bytes: the README is the newcomer's page; the rest belongs in docs/
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def pages(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def prose(text: str) -> str:
    """The text without code blocks and code spans, where a `[x](y)` is code, not a link."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its rendered text, lower-cased, with every character that is not a
    letter, digit, underscore, hyphen or space dropped and each space made a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return "".join(c for c in text.lower() if c.isalnum() or c in "_- ").replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in a Markdown file; a repeated one gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text())):  # a heading's code span is its text
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(root: Path) -> list[str]:
    """'page: target (why)' for each relative link of README.md and docs/*.md that leads nowhere."""
    bad = []
    for page in pages(root):
        for target in LINK.findall(prose(page.read_text())):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:: not checked offline
                continue
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            where = f"{page.relative_to(root)}: {target}"
            if not dest.is_file():
                bad.append(f"{where} (no such file)")
            elif anchor and anchor not in anchors(dest):
                bad.append(f"{where} (no heading with that anchor in {dest.name})")
    return bad


def test_every_relative_link_resolves_to_a_file_and_heading():
    assert broken_links(REPO) == []


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(REPO / t.partition("#")[0]).resolve() for t in LINK.findall(prose((REPO / "README.md").read_text()))}
    assert [p.name for p in pages(REPO)[1:] if p.resolve() not in linked] == []


def test_every_python_file_the_pages_name_exists():
    """A file renamed or split leaves no page pointing at its old name."""
    named = {m for page in pages(REPO) for m in re.findall(r"`((?:[\w-]+/)*[\w-]+\.py)\b", page.read_text())}
    assert sorted(n for n in named if not (REPO / n).is_file()) == []


def test_readme_stays_short():
    size = (REPO / "README.md").stat().st_size
    assert size <= README_LIMIT, f"README.md is {size} bytes; move detail into docs/ (limit {README_LIMIT})"


def test_the_checker_finds_a_missing_file_or_anchor_and_ignores_code(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## The `--llm` flag: what it does\n\n## Twice\n\n## Twice\n")
    (tmp_path / "README.md").write_text(
        "[ok](docs/a.md) [ok](docs/a.md#the---llm-flag-what-it-does) [ok](docs/a.md#twice-1) [ok](#readme)\n"
        "[gone](docs/b.md) [no anchor](docs/a.md#the-llm-flag) ![img](docs/x.png) [web](https://example.com/x)\n"
        "`[code](docs/none.md)`\n\n```\n[fenced](docs/none.md)\n```\n\n# README\n")
    assert broken_links(tmp_path) == [
        "README.md: docs/b.md (no such file)",
        "README.md: docs/a.md#the-llm-flag (no heading with that anchor in a.md)",
        "README.md: docs/x.png (no such file)"]


def test_the_readme_and_results_page_match_bench_results():
    """The generated tables are what `python -m bench.ablation --table` writes from bench/results/ now."""
    done = subprocess.run([sys.executable, "-m", "bench.ablation", "--check"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_task_counts_the_pages_state_are_the_tables():
    """"Crafter's N tasks" and the tasks with a test of their own, as environments.md says them, are the table's."""
    from envs.crafter_tasks import _TEST_ROWS, TASKS
    text = " ".join((REPO / "docs" / "environments.md").read_text().split())
    said = re.search(r"prints Crafter's (\d+) tasks.*?one per achievement \((\d+),.*?(\d+) with a test of their own "
                     r"\(([^)]*)\)", text)
    assert said, "environments.md no longer says how many tasks there are in the expected words"
    assert (int(said[1]), int(said[2]), int(said[3])) == (len(TASKS), len(TASKS) - len(_TEST_ROWS) - 1, len(_TEST_ROWS))
    assert re.findall(r"`(\w+)`", said[4]) == [row[0] for row in _TEST_ROWS]

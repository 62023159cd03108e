"""A skill library that outlives a run (Voyager-style): code actions proven in RL training, kept on disk.

Writing, checking and fixing a code action costs LLM calls and minutes. The library keeps every code
action that was accepted (sandbox check + dry run) and then chosen by the RL agent in training, with
where it came from and how it did there, so that a later run's slow agent can reuse it by name (no
fast-agent call at all) and the fast agent sees the most related ones as examples. The hand-written
reference skills (reference/skills.py) seed it, labelled hand-written.

    python skill_library.py list                        # the library under runs/skills, as a table
    python skill_library.py list --skills PATH          # another library
    python skill_library.py show chop_tree              # the best version's record and source

On disk one skill version is two files, named by the skill and a hash of its source:
    chop_tree-1a2b3c4d5e.py     the source exactly as the sandbox receives it (a header would shift the
                                line numbers of its error messages); read or diff it like any code
    chop_tree-1a2b3c4d5e.json   its record: description, origin (hand-written or llm), backend and
                                primitive API, the task and run that produced it, and one row per
                                training iteration that measured it (calls, ok, steps, errors)
The .json is written last and is what makes a version exist, so a crash between the two leaves no
half skill. Every write is a temporary file + os.replace under an flock on `.lock`, and a measurement
row is keyed by its run and iteration: two runs writing one library at once lose nothing, and an
iteration recorded twice (a resume) counts once.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from core import CodeAction
from reference import minedojo_skills, skills

DEFAULT_DIR = "skills"  # under --runs-dir: the library lives next to the runs whose skills it holds
FAILED_SHARE = 0.1  # errors in this share of a version's calls mark it failed in training: kept, ranked last
MAX_LISTED, MAX_LIST_CHARS = 40, 4000  # the slow agent's list of skills stays this small
EXAMPLES, MAX_EXAMPLE_CHARS = 2, 4000  # related skills shown to the fast agent as examples
STOP_WORDS = {"the", "and", "for", "with", "when", "then", "from", "that", "this", "its", "into", "until",
              "once", "return", "returns", "true", "false", "api", "visible", "nearest", "walk"}
NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")


def backend_of(task: str) -> str:
    """The game a task runs in: skills are only offered to runs of the same backend."""
    return task.split(":")[0] if ":" in task else "crafter"


def library_path(value: str, runs_dir: str) -> Path | None:
    """`--skills` as a directory: "" is the default under --runs-dir, "none" is no library at all."""
    if value.lower() == "none":
        return None
    return Path(value) if value else Path(runs_dir) / DEFAULT_DIR


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) >= 3 and w not in STOP_WORDS}


@dataclass
class SkillVersion:
    """One stored version: its id (the file stem), its source, and its record."""

    id: str
    source: str
    record: dict

    @property
    def name(self) -> str:
        return self.record["name"]

    def totals(self) -> dict[str, int]:
        rows = self.record.get("measured", [])
        return {k: sum(int(r.get(k, 0)) for r in rows) for k in ("calls", "ok", "steps", "errors")}

    @property
    def failed(self) -> bool:
        t = self.totals()
        return t["calls"] > 0 and t["errors"] >= FAILED_SHARE * t["calls"]

    def rank_key(self) -> tuple:
        """Higher is better: not failed, then measured in training, then the success rate (smoothed,
        so 1 of 1 does not beat 40 of 50), then how often it was used."""
        t = self.totals()
        return (not self.failed, t["calls"] > 0, (t["ok"] + 1) / (t["calls"] + 2), t["calls"])

    def summary(self) -> str:
        t = self.totals()
        if self.failed:
            how = f"failed in training: errors in {t['errors']} of {t['calls']} calls"
        elif t["calls"]:
            how = f"returned True in {t['ok'] / t['calls']:.2f} of {t['calls']} calls in training"
        else:
            how = "not yet measured in training"
        return f"{self.record['origin']}, {how}"

    def code_action(self) -> CodeAction:
        label = skills.LABEL if self.record["origin"] == "hand-written" else ""
        return CodeAction(self.name, self.source, label + self.record["description"])


class SkillLibrary:
    """A directory of skill versions; any number of processes may read and write it at once. One
    object serves one backend and primitive API: it only offers and stores skills written for them."""

    def __init__(self, path: str | Path, backend: str = "crafter", api: str = "", api_doc: str = ""):
        self.path, self.backend, self.api, self.api_doc = Path(path), backend, api, api_doc

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Every writer holds this lock, so read-merge-write never loses another process's update."""
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.path / ".lock", "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def _write(self, path: Path, text: str) -> None:
        """Atomically: readers see the old file or the new one, never half of one."""
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def versions(self) -> list[SkillVersion]:
        """Every stored version for this backend, best-ranked first."""
        out = []
        for meta in sorted(self.path.glob("*.json")):
            try:
                record = json.loads(meta.read_text())
                source = meta.with_suffix(".py").read_text()
            except (OSError, ValueError) as e:  # a file mangled by hand must not stop a run
                print(f"warning: skipping {meta}: {e}", file=sys.stderr)
                continue
            if record.get("backend") == self.backend:
                out.append(SkillVersion(meta.stem, source, record))
        return sorted(out, key=SkillVersion.rank_key, reverse=True)

    def best(self) -> dict[str, SkillVersion]:
        """Skill name -> its best-ranked version."""
        out: dict[str, SkillVersion] = {}
        for v in self.versions():
            out.setdefault(v.name, v)
        return out

    def add(self, action: CodeAction, *, origin: str, task: str | None = None, run: str | None = None) -> str:
        """Store a version (named by its function and source hash) unless it is already there; its id."""
        name = action.function
        if not NAME_RE.match(name):
            raise ValueError(f"skill name {name!r} is not snake_case")
        vid = f"{name}-{hashlib.sha256(action.source.encode()).hexdigest()[:10]}"
        record = {"name": name, "description": action.doc.removeprefix(skills.LABEL).strip(), "origin": origin,
                  "backend": self.backend, "api": self.api,
                  "api_doc_sha256": hashlib.sha256(self.api_doc.encode()).hexdigest()[:16],
                  "task": task, "run": run, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "measured": []}
        with self._locked():
            if not (self.path / f"{vid}.json").is_file():  # the first writer's provenance is kept
                self._write(self.path / f"{vid}.py", action.source)
                self._write(self.path / f"{vid}.json", json.dumps(record, indent=1) + "\n")
        return vid

    def record(self, vid: str, row: dict) -> None:
        """Add one iteration's measurement (calls, ok, steps, errors) to a version; keyed by run and
        iteration, so recording the same iteration again changes nothing."""
        path = self.path / f"{vid}.json"
        with self._locked():
            record = json.loads(path.read_text())
            key = (row["run"], row["iteration"])
            if all((r["run"], r["iteration"]) != key for r in record["measured"]):
                record["measured"].append(row)
                self._write(path, json.dumps(record, indent=1) + "\n")

    def seed(self) -> None:
        """The backend's hand-written reference skills join the library (once: they are content-addressed)."""
        for skill in {"crafter": skills.SKILLS, "minedojo": minedojo_skills.SKILLS}.get(self.backend, {}).values():
            self.add(skill, origin="hand-written")

    def catalogue(self, task: str, hand_written: bool = True) -> dict[str, str]:
        """What the slow agent is told: name -> one line, the skills most related to the task first,
        capped at MAX_LISTED skills and MAX_LIST_CHARS characters; without the hand-written ones if not
        `hand_written` (an LLM run uses none unless its user asks: train.py --hand-written)."""
        words = _words(task)
        best = sorted((v for v in self.best().values() if hand_written or v.record["origin"] != "hand-written"),
                      key=lambda v: (len(words & _words(f"{v.name} {v.record['description']}")), v.rank_key()),
                      reverse=True)
        out, size = {}, 0
        for v in best[:MAX_LISTED]:
            line = f"{v.record['description'].splitlines()[0][:120]} ({v.summary()})"
            size += len(v.name) + len(line) + 4
            if size > MAX_LIST_CHARS:
                break
            out[v.name] = line
        return out

    def related(self, text: str, k: int = EXAMPLES) -> list[CodeAction]:
        """The k best versions sharing the most words with `text` (task, name, spec) in their name and
        description: the fast agent's examples. Word overlap is enough to find `chop_tree` for wood."""
        words, out, size = _words(text), [], 0
        scored = [(len(words & _words(f"{v.name} {v.record['description']}")), v)
                  for v in self.best().values()]
        for score, v in sorted(scored, key=lambda sv: (sv[0], sv[1].rank_key()), reverse=True):
            if score == 0 or len(out) == k:
                break
            if v.failed or size + len(v.source) > MAX_EXAMPLE_CHARS:
                continue
            out.append(v.code_action())
            size += len(v.source)
        return out

    def reuse(self, name: str,
              check: Callable[[str, str], tuple[str | None, int | None]]) -> tuple[CodeAction | None, str]:
        """The best version of `name`, if it passes `check` (the fast agent's sandbox check and dry run,
        exactly as new code); else None and why."""
        version = self.best().get(name)
        if version is None:
            return None, f"the library has no {self.backend} skill named {name!r}"
        error, _ = check(version.source, name)
        return (None, f"{version.id} failed its check: {error}") if error else (version.code_action(), version.id)

    def record_iteration(self, actions: list[CodeAction], stats: dict[str, dict], *, task: str, run: str,
                         iteration: int) -> list[str]:
        """Store each code action the RL agent chose in this iteration and add its measurement;
        `stats` is code_actions.CodeStats.rows (code action name -> chosen, ok, steps, reward, errors). The
        hand-written skills carry skills.LABEL in their doc; everything else came from an LLM."""
        stored = []
        for action in actions:
            row = stats.get(action.name)
            if not row or not row["chosen"]:
                continue  # never used in training: nothing proven, nothing kept
            origin = "hand-written" if action.doc.startswith(skills.LABEL) else "llm"
            vid = self.add(action, origin=origin, task=task, run=run)
            errors = row["errors"]
            self.record(vid, {"run": run, "iteration": iteration, "task": task, "calls": row["chosen"],
                              "ok": row["ok"], "steps": row["steps"], "errors": sum(errors.values()),
                              "top_error": errors.most_common(1)[0][0] if errors else None})
            stored.append(vid)
        return stored


def table(versions: list[SkillVersion]) -> str:
    """The library as a Markdown table: one row per version, best first within each name."""
    lines = ["| skill | version | origin | backend | task | calls | success | mean steps | errors | status |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    seen = set()
    for v in sorted(versions, key=lambda v: v.name):  # stable: the ranking order stays within a name
        t = v.totals()
        calls = t["calls"]
        status = "failed" if v.failed else "best" if v.name not in seen else "-"
        seen.add(v.name)
        rate, steps = (f"{t['ok'] / calls:.2f}", f"{t['steps'] / calls:.1f}") if calls else ("-", "-")
        lines.append(f"| {v.name} | {v.id.rsplit('-', 1)[1]} | {v.record['origin']} | {v.record['backend']} "
                     f"| {v.record.get('task') or '-'} | {calls} | {rate} | {steps} | {t['errors']} | {status} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["list", "show"])
    parser.add_argument("name", nargs="?", help="show: the skill whose best version to print")
    parser.add_argument("--skills", default=str(Path("runs") / DEFAULT_DIR), help="the library directory")
    parser.add_argument("--backend", default="crafter")
    args = parser.parse_args(argv)
    lib = SkillLibrary(args.skills, args.backend)
    if not lib.path.is_dir():
        parser.error(f"--skills {args.skills}: no such directory (a run creates it)")
    if args.command == "list":
        versions = lib.versions()
        print(f"{lib.path}: {len(versions)} versions of {len({v.name for v in versions})} skills\n")
        print(table(versions))
        return 0
    version = lib.best().get(args.name or "")
    if version is None:
        parser.error(f"no {args.backend} skill named {args.name!r} in {lib.path}")
    print(json.dumps(version.record, indent=1))
    print(f"\n# {lib.path / (version.id + '.py')}\n{version.source}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

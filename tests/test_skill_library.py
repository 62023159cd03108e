"""The skill library that outlives a run: storage, ranking, concurrent writers, and reuse across runs.

    python -m pytest -q tests/test_skill_library.py
"""

from __future__ import annotations

import fcntl
import json
import multiprocessing
from collections import Counter
from pathlib import Path

import pytest

import skill_library
import train
from core import CodeAction, SubAction, api_doc
from env import CrafterAPI, get_task
from fast_agent import FastAgent
from llm import LLMClient
from reference import skills
from slow_agent import SlowAgent
from tests.fake_llm import FakeLLMServer

DOC = api_doc(CrafterAPI)
CHOP = CodeAction("chop_tree", "def chop_tree(api):\n    \"\"\"Chop a tree.\"\"\"\n    return api.do()\n",
                  "Chop a tree.")


def lib_at(path: Path) -> skill_library.SkillLibrary:
    return skill_library.SkillLibrary(path, "crafter", "CrafterAPI", DOC)


def row(calls: int, ok: int, errors: int = 0) -> dict:
    """One code action's counts as code_actions.CodeStats.rows holds them."""
    errs = Counter({"line 2: boom": errors} if errors else {})
    return {"chosen": calls, "ok": ok, "steps": 3 * calls, "errors": errs}


def test_a_version_is_two_readable_files_and_its_measurements_add_up(tmp_path):
    lib = lib_at(tmp_path)
    (vid,) = lib.record_iteration([CHOP], {"chop_tree": row(10, 4)}, task="collect_wood", run="r1",
                                  iteration=1)
    lib.record_iteration([CHOP], {"chop_tree": row(6, 2)}, task="collect_wood", run="r1", iteration=2)
    lib.record_iteration([CHOP], {"chop_tree": row(6, 2)}, task="collect_wood", run="r1", iteration=2)
    assert (tmp_path / f"{vid}.py").read_text() == CHOP.source  # byte for byte what the sandbox gets
    record = json.loads((tmp_path / f"{vid}.json").read_text())
    assert record["origin"] == "llm" and record["task"] == "collect_wood" and record["run"] == "r1"
    assert record["backend"] == "crafter" and record["api"] == "CrafterAPI" and record["description"] == "Chop a tree."
    (v,) = lib.versions()
    assert v.totals() == {"calls": 16, "ok": 6, "steps": 48, "errors": 0}  # iteration 2 counted once
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob(".*.tmp"))


def test_unused_code_is_not_kept_and_other_backends_are_not_offered(tmp_path):
    lib = lib_at(tmp_path)
    assert lib.record_iteration([CHOP], {"chop_tree": row(0, 0)}, task="collect_wood", run="r", iteration=1) == []
    skill_library.SkillLibrary(tmp_path, "minedojo").record_iteration([CHOP], {"chop_tree": row(5, 5)},
                                                                      task="minedojo:harvest_log", run="r", iteration=1)
    assert lib.versions() == [] and len(skill_library.SkillLibrary(tmp_path, "minedojo").versions()) == 1


def test_seeded_hand_written_skills_are_labelled_and_measured_versions_rank_first(tmp_path):
    lib = lib_at(tmp_path)
    lib.seed()
    lib.seed()  # content-addressed: seeding twice adds nothing
    assert len(list(tmp_path.glob("*.json"))) == len(skills.SKILLS)
    hand = lib.best()["chop_tree"]
    assert hand.record["origin"] == "hand-written" and hand.code_action().doc.startswith(skills.LABEL)
    assert hand.code_action().source == skills.SKILLS["chop_tree"].source
    lib.record_iteration([CHOP], {"chop_tree": row(20, 3)}, task="collect_wood", run="r", iteration=1)
    assert lib.best()["chop_tree"].source == CHOP.source  # proven in training beats never measured


def test_a_skill_that_failed_in_training_is_kept_but_ranked_last(tmp_path):
    lib = lib_at(tmp_path)
    lib.seed()
    lib.record_iteration([CHOP], {"chop_tree": row(20, 15, errors=5)}, task="collect_wood", run="r",
                         iteration=1)
    failed = next(v for v in lib.versions() if v.source == CHOP.source)
    assert failed.failed and "failed in training" in failed.summary()
    assert lib.best()["chop_tree"].record["origin"] == "hand-written"
    assert lib.versions()[-1].id == failed.id  # kept, ranked last


def test_catalogue_is_capped_and_related_skills_share_words_with_the_task(tmp_path, monkeypatch):
    lib = lib_at(tmp_path)
    lib.seed()
    monkeypatch.setattr(skill_library, "MAX_LISTED", 5)
    listed = lib.catalogue("collect_wood")
    assert len(listed) == 5 and "chop_tree" in listed  # its doc says "+1 wood"
    assert "hand-written" in listed["chop_tree"] and "not yet measured" in listed["chop_tree"]
    examples = lib.related("place_table Place a crafting table next to the player")
    assert examples[0].name == "place_table" and len(examples) <= skill_library.EXAMPLES
    assert lib.related("zzz qqq") == []


def test_reused_skills_still_pass_the_sandbox_check_and_the_dry_run(tmp_path):
    lib = lib_at(tmp_path)
    bad = CodeAction("chop_tree", "def chop_tree(api):\n    import os\n    return True\n", "Chop.")
    lib.record_iteration([bad], {"chop_tree": row(5, 5)}, task="collect_wood", run="r", iteration=1)
    crash = CodeAction("fell_tree", "def fell_tree(api):\n    return 1 / 0\n", "Fell.")
    lib.record_iteration([crash], {"fell_tree": row(5, 5)}, task="collect_wood", run="r", iteration=1)
    action, why = lib.reuse("chop_tree", FastAgent(None).check_and_dry_run)
    assert action is None and "Import is not allowed" in why  # the sandbox check
    action, why = lib.reuse("fell_tree", FastAgent(None).check_and_dry_run)
    assert action is None and "ZeroDivisionError" in why  # the dry run
    lib.seed()
    action, why = lib.reuse("place_table", FastAgent(None).check_and_dry_run)
    assert action is not None and action.source == skills.SKILLS["place_table"].source
    assert lib.reuse("fly", FastAgent(None).check_and_dry_run)[0] is None


def test_the_plan_may_reuse_only_skills_the_library_holds():
    agent_plan = {"subtasks": [], "rl_config": {"shaping": {}, "mask_actions": []}, "subactions": [
        {"name": "fell_tree", "how": "code", "spec": "Chop.", "reason": "fixed", "reuse": True}]}
    good = dict(agent_plan, subactions=[dict(agent_plan["subactions"][0], name="chop_tree")])
    with FakeLLMServer([json.dumps(agent_plan), json.dumps(good)]) as srv:
        slow = SlowAgent(LLMClient(srv.url, "fake", max_retries=0, sleep=lambda s: None))
        slow.catalogue = {"chop_tree": "Walk to the nearest visible tree and chop it once (hand-written)."}
        plan = slow.plan(get_task("collect_wood"), DOC)
    first = srv.requests[0].json["messages"][1]["content"]
    assert "- chop_tree: Walk to the nearest visible tree" in first and '"reuse": true' in first
    assert "['fell_tree'] say \"reuse\": true but are not in the skill library" in \
        srv.requests[1].json["messages"][-1]["content"]
    assert plan.subactions[0].reuse is True and plan.subactions[0].name == "chop_tree"


def test_the_fast_agent_is_shown_the_related_library_skills():
    reply = "```python\ndef place_table(api):\n    return api.place('table')\n```"
    with FakeLLMServer([reply]) as srv:
        FastAgent(LLMClient(srv.url, "fake", max_retries=0)).write(
            SubAction("place_table", "code", "Place a table."), DOC, examples=[skills.SKILLS["place_table"]])
    prompt = srv.requests[0].json["messages"][1]["content"]
    assert "Example from the skill library, place_table:" in prompt
    assert skills.SKILLS["place_table"].source.strip() in prompt


# ----------------------------------------------------------------------------------------------
# Two runs writing the same library at once. A lost update needs both writers to read a record before
# either writes it back; left to the scheduler that happens in some runs only, so each writer here
# pauses between record's read and its write until every writer has read, unless it holds the
# library's lock (then no other writer can be reading, and waiting would deadlock). Without the lock
# every round of writes then loses a row, in every run.


def _lock_is_held(path: Path) -> bool:
    """Whether a writer holds the library's (exclusive) lock. flock conflicts between two opens of a file
    even in one process; the probe asks for a shared lock, so two probes never block each other."""
    with open(path / ".lock", "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
        return False


class _ReadThenWait(skill_library.SkillLibrary):
    """The library as a run uses it, except that writing `shared` back first waits for the other writers."""

    def __init__(self, path: Path, shared: str, barrier) -> None:
        super().__init__(path, "crafter", "CrafterAPI", DOC)
        self.shared, self.barrier = shared, barrier

    def _write(self, path: Path, text: str) -> None:
        if path.name == self.shared and not _lock_is_held(self.path):
            self.barrier.wait(30)  # every writer has read the record and none has written it back
        super()._write(path, text)


def _writer(path: str, who: str, shared: str, barrier, start, n: int) -> None:
    lib = _ReadThenWait(Path(path), shared, barrier)
    start.wait()
    for i in range(n):
        own = CodeAction(f"skill_{who}_{i % 3}", f"def skill_{who}_{i % 3}(api):\n    return {i % 3}\n", "x")
        lib.record_iteration([CHOP, own], {"chop_tree": row(1, 1), own.name: row(1, 0)},
                             task="collect_wood", run=who, iteration=i)


def test_two_concurrent_writers_lose_nothing(tmp_path):
    shared = lib_at(tmp_path).add(CHOP, origin="llm") + ".json"  # both writers measure this one version
    ctx = multiprocessing.get_context("spawn")
    start, barrier, n = ctx.Event(), ctx.Barrier(2), 20
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), who, shared, barrier, start, n)) for who in "ab"]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    by_name = {v.name: v for v in lib_at(tmp_path).versions()}
    assert {(r["run"], r["iteration"]) for r in by_name["chop_tree"].record["measured"]} == \
        {(who, i) for who in "ab" for i in range(n)}  # every measurement of the shared skill kept
    assert by_name["chop_tree"].totals()["calls"] == 2 * n
    assert sorted(by_name) == sorted(["chop_tree"] + [f"skill_{w}_{k}" for w in "ab" for k in range(3)])
    assert sum(by_name[f"skill_a_{k}"].totals()["calls"] for k in range(3)) == n


# ----------------------------------------------------------------------------------------------
# Acceptance: run A writes a wood skill, run B reuses it with no fast-agent call.

TINY = ["--num-envs", "2", "--num-steps", "32", "--eval-episodes", "1", "--checkpoint-every", "300",
        "--max-macro-steps", "24", "--no-capture-video", "--iterations", "1", "--total-steps", "300"]
CHOP_A = ("```python\ndef chop_tree(api):\n    \"\"\"Chop the nearest visible tree (written in run A).\"\"\"\n"
          "    if not api.go_to('tree', 20):\n        return False\n    return api.do()\n```")
TABLE_B = ("```python\ndef place_table(api):\n    \"\"\"Place a table (written in run B).\"\"\"\n"
           "    if api.inventory()['wood'] < 2:\n        return False\n    return api.place('table')\n```")
FIND = {"name": "find_tree", "how": "rl", "spec": "Explore until a tree is visible.", "reason": "pixels"}
PLAN_A = {"subtasks": [], "rl_config": {"shaping": {}, "mask_actions": []}, "subactions": [
    FIND, {"name": "chop_tree", "how": "code", "spec": "Chop the nearest visible tree.", "reason": "fixed"}]}
PLAN_B = {"subtasks": [], "rl_config": {"shaping": {}, "mask_actions": []}, "subactions": [
    FIND, {"name": "chop_tree", "how": "code", "spec": "Chop a tree.", "reason": "in the library", "reuse": True},
    {"name": "place_table", "how": "code", "spec": "Place a table with 2 wood.", "reason": "fixed"}]}


def scripted(request: dict) -> str:
    system, user = request["messages"][0]["content"], str(request["messages"][1]["content"])
    if system.startswith("You are the slow agent"):
        return json.dumps(PLAN_B if user.startswith("Task `place_table`") else PLAN_A)
    return TABLE_B if "Write `place_table`" in user else CHOP_A


def one_run(root: Path, lib: Path, task: str) -> tuple[Path, list[dict]]:
    with FakeLLMServer(scripted) as srv:
        assert train.main(TINY + ["--task", task, "--llm", "http", "--llm-url", srv.url, "--runs-dir", str(root),
                                  "--skills", str(lib)]) == 0
        requests = [r.json for r in srv.requests]
    (d,) = list(root.iterdir())
    return d, requests


def writes(requests: list[dict], name: str) -> list[dict]:
    return [r for r in requests if f"Write `{name}`" in json.dumps(r["messages"])]


@pytest.mark.slow
def test_run_b_reuses_run_a_wood_skill_without_a_fast_agent_call(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    lib = tmp_path / "shared_skills"
    a_dir, a_requests = one_run(tmp_path / "a", lib, "collect_wood")
    assert len(writes(a_requests, "chop_tree")) == 1
    wood = skill_library.SkillLibrary(lib).best()["chop_tree"]
    assert wood.record["origin"] == "llm" and wood.record["task"] == "collect_wood"
    assert wood.record["run"] == str(a_dir.resolve()) and wood.totals()["calls"] > 0

    b_dir, b_requests = one_run(tmp_path / "b", lib, "place_table")
    assert writes(b_requests, "chop_tree") == []  # reused: no fast-agent call for it
    assert len(writes(b_requests, "place_table")) == 1 and len(b_requests) == 2  # one plan, one code
    assert "- chop_tree: Chop the nearest visible tree (written in run A)." in json.dumps(b_requests[0])
    assert (b_dir / "iter_1/skills/chop_tree.py").read_text() == (a_dir / "iter_1/skills/chop_tree.py").read_text()
    assert "Example from the skill library, place_table" in json.dumps(writes(b_requests, "place_table")[0])
    summary = (b_dir / "summary.md").read_text()
    assert f"LLM calls made by this run: {len(b_requests)} " in summary
    assert "with no call to write them: chop_tree." in summary
    table = {v.name: v for v in skill_library.SkillLibrary(lib).versions() if v.record["origin"] == "llm"}
    assert table["place_table"].record["task"] == "place_table"
    assert {r["run"] for r in table["chop_tree"].record["measured"]} == {str(a_dir.resolve()), str(b_dir.resolve())}


def test_list_prints_the_library_as_a_table(tmp_path, capsys):
    lib = lib_at(tmp_path)
    lib.seed()
    lib.record_iteration([CHOP], {"chop_tree": row(10, 4)}, task="collect_wood", run="r", iteration=1)
    assert skill_library.main(["list", "--skills", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"{len(skills.SKILLS) + 1} versions of {len(skills.SKILLS)} skills" in out
    line = next(x for x in out.splitlines() if "| llm |" in x)
    assert line.startswith("| chop_tree |") and "| 10 | 0.40 | 3.0 | 0 | best |" in line
    with pytest.raises(SystemExit) as e:
        skill_library.main(["list", "--skills", str(tmp_path / "nowhere")])
    assert e.value.code == 2


def test_skills_flag_default_none_and_bad_path(tmp_path, capsys):
    assert skill_library.library_path("", "runs") == Path("runs/skills")
    assert skill_library.library_path("none", "runs") is None
    assert skill_library.library_path("x/lib", "runs") == Path("x/lib")
    afile = tmp_path / "afile"
    afile.write_text("")
    with pytest.raises(SystemExit) as e:
        train.main(["--skills", str(afile), "--runs-dir", str(tmp_path / "runs"), "--llm", "reference"])
    assert e.value.code == 2 and "cannot use it as the skill library directory" in capsys.readouterr().err


PLAN_REUSE = {"subtasks": [], "rl_config": {"shaping": {}, "mask_actions": []}, "subactions": [
    FIND, {"name": "chop_tree", "how": "code", "spec": "Chop a tree.", "reason": "in the library", "reuse": True}]}


@pytest.mark.slow
@pytest.mark.parametrize("hand_written", [False, True])
def test_train_gives_the_runs_hand_written_setting_to_the_catalogue_and_to_reuse(hand_written, tmp_path, monkeypatch):
    """An LLM run is offered and reuses the library's hand-written skills only with --hand-written. The library
    holds the seeded hand-written skills and a measured LLM chop_tree, which the catalogue lists either way; while
    the planner answers, another run's measurements make the hand-written chop_tree the best version, so the
    plan's "reuse" meets hand-written code: reused with --hand-written, else written by the fast agent."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    lib = lib_at(tmp_path / "lib")
    lib.record(lib.add(CHOP, origin="llm"), {"run": "earlier", "iteration": 1, "calls": 10, "ok": 5, "steps": 30,
                                             "errors": 0})

    def replies(request: dict) -> str:
        if request["messages"][0]["content"].startswith("You are the slow agent"):
            vid = lib.add(skills.SKILLS["chop_tree"], origin="hand-written")  # seeded already: its id
            lib.record(vid, {"run": "other", "iteration": 1, "calls": 100, "ok": 90, "steps": 300, "errors": 0})
            return json.dumps(PLAN_REUSE)
        return CHOP_A

    with FakeLLMServer(replies) as srv:
        assert train.main(TINY + ["--task", "collect_wood", "--llm", "http", "--llm-url", srv.url, "--skills",
                                  str(lib.path), "--runs-dir", str(tmp_path / "runs")]
                          + ["--hand-written"] * hand_written) == 0
        requests = [r.json for r in srv.requests]
    plan_request = json.dumps(requests[0]["messages"])
    assert "- chop_tree: Chop a tree. (llm, returned True in 0.50 of 10 calls in training)" in plan_request
    assert ("- place_table: " in plan_request) == hand_written  # a hand-written skill only the seeding added
    assert len(writes(requests, "chop_tree")) == (0 if hand_written else 1)
    (d,) = list((tmp_path / "runs").iterdir())
    assert ("chop_tree (hand-written)" in (d / "summary.md").read_text()) == hand_written

"""The slow loop end to end through train.main: the critic's decisions change the next iteration (reference
and HTTP backends alike), a change that makes things worse is rolled back, and a long task trains its
chain of sub-tasks as a curriculum. Run: python -m pytest -q tests/test_slow_loop.py
"""

import json
import re

import pytest
import torch

import critic
import env
import slow_agent
import train
from core import CodeAction
from reference import critic_rules, plans, skills
from tests.fake_llm import FakeLLMServer

SMALL = ["--num-envs", "4", "--num-steps", "64", "--eval-episodes", "2", "--no-capture-video", "--skills", "none",
         "--seed", "3"]
WEAK_CHOP = CodeAction("chop_tree", '''
def chop_tree(api):
    """Gives up at once: a deliberately weak first version."""
    return False
''', "Gives up at once.")


def run_dir(root):
    (d,) = [p for p in root.iterdir() if p.is_dir()]
    return d


def test_a_failing_first_skill_is_replaced_by_a_variant_for_a_logged_reason(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(skills.SKILLS, "chop_tree", WEAK_CHOP)  # iteration 1 fails by construction
    assert train.main(SMALL + ["--task", "collect_wood", "--llm", "reference", "--iterations", "2",
                               "--total-steps", "3000", "--runs-dir", str(tmp_path)]) == 0
    d = run_dir(tmp_path)
    feedback = json.loads((d / "iter_1" / "feedback.json").read_text())
    assert feedback["variants"] == {"chop_tree": "search"}
    assert any(r.startswith("chop_tree:") for r in feedback["reasons"])
    assert "critic decided: chop_tree:" in capsys.readouterr().out
    assert not (d / "iter_2" / "skills" / "chop_tree.py").exists()  # v1 stays; v2 is the variant
    assert (d / "iter_2" / "skills" / "chop_tree_v2.py").read_text() == skills.variants("chop_tree")["search"].source


def test_a_variant_keeps_its_own_initiation_when_the_next_critique_changes_nothing(tmp_path, monkeypatch):
    """The critic swaps chop_tree for its search variant (which needs no tree in view: it searches), then decides
    nothing: the third iteration trains that same code action. The plan's initiation for chop_tree is the old
    one, and putting it back on the variant would be a change nobody decided, measured (and rolled back) as one."""
    monkeypatch.setitem(skills.SKILLS, "chop_tree", WEAK_CHOP)
    critiques = []

    def critique_once(plan, code_actions, stats):  # the rules at iteration 1, no decision after it
        critiques.append(plan)
        return critic_rules.rule_based_critique(plan, code_actions, stats) if len(critiques) == 1 else \
            critic.Feedback("nothing stood out", [], [], {})

    monkeypatch.setattr(slow_agent, "rule_based_critique", critique_once)
    assert train.main(SMALL + ["--task", "collect_wood", "--llm", "reference", "--iterations", "3",
                               "--total-steps", "4500", "--runs-dir", str(tmp_path)]) == 0
    d = run_dir(tmp_path)
    assert json.loads((d / "iter_1" / "feedback.json").read_text())["variants"] == {"chop_tree": "search"}
    used = [set(json.loads((d / f"iter_{k}" / "stats.json").read_text())["code_actions"]) for k in (2, 3)]
    assert "chop_tree_v2" in used[0] and "chop_tree_v2" in used[1] and "chop_tree_v3" not in used[1]
    history = torch.load(d / "checkpoint.pt", weights_only=False)["extra"]["history"]
    assert history[2].get("change") is None  # iteration 3 measured no change: there was none


def script(request: dict) -> str:
    """An LLM planner, code writer and critic; the critic asks for the search variant of chop_tree."""
    system = request["messages"][0]["content"]
    if system.startswith("You are the slow agent"):
        return json.dumps(plans.reference_plan("collect_wood"))
    if system.startswith("You are the critic"):
        return json.dumps({"summary": "LLM-CRITIC", "to_code": [], "to_rl": [], "fixes": {},
                           "variants": {"chop_tree": "search"},
                           "reasons": ["chop_tree: search when no tree is in view"]})
    return "```python\n" + skills.SKILLS["chop_tree"].source + "\n```"


def test_over_http_with_hand_written_the_critics_variant_goes_the_same_way_and_a_worse_change_is_rolled_back(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    # the rule itself is tested in test_critic.py; here: what train.py does when it says "worse"
    monkeypatch.setattr(critic, "keep_change", lambda previous, current: (False, "rolled back: TEST-SAYS-WORSE"))
    with FakeLLMServer(script) as srv:
        assert train.main(SMALL + ["--task", "collect_wood", "--llm", "http", "--llm-url", srv.url, "--llm-model",
                                   "fake", "--iterations", "3", "--total-steps", "1500", "--hand-written",
                                   "--runs-dir", str(tmp_path)]) == 0
        systems = [r.json["messages"][0]["content"][:30] for r in srv.requests]
    d = run_dir(tmp_path)
    assert (d / "iter_2" / "skills" / "chop_tree_v2.py").read_text() == skills.variants("chop_tree")["search"].source
    out = capsys.readouterr().out
    assert "[iter 2] the critic's change: rolled back: TEST-SAYS-WORSE" in out
    # the user asked: --hand-written
    assert "reference/skills.py's hand-written variant 'search', not LLM output" in out
    assert "code actions in use: chop_tree_v2 (all hand-written, not LLM output)" in out
    history = torch.load(d / "checkpoint.pt", weights_only=False)["extra"]["history"]
    assert [h["code_actions"] for h in history] == [["chop_tree"], ["chop_tree_v2"], ["chop_tree"]]
    assert history[1]["change"] == "rolled back: TEST-SAYS-WORSE" and history[1]["hand_written"] == ["chop_tree_v2"]
    assert "chop_tree_v2 (hand-written)" in (d / "summary.md").read_text()
    assert json.loads((d / "iter_3" / "plan.json").read_text()) == json.loads((d / "iter_1" / "plan.json").read_text())
    assert sum(s.startswith("You are the slow agent") for s in systems) == 2  # no re-plan after the rollback
    assert sum(s.startswith("You are the critic") for s in systems) == 1  # nor a critique of the dropped plan


@pytest.mark.parametrize("task", ["collect_iron", "collect_diamond"])
def test_a_long_task_trains_its_chain_as_a_curriculum(tmp_path, capsys, task):
    assert train.main(SMALL + ["--task", task, "--llm", "reference", "--iterations", "2", "--total-steps", "3000",
                               "--runs-dir", str(tmp_path)]) == 0
    d = run_dir(tmp_path)
    chain = json.loads((d / "iter_1" / "plan.json").read_text())["subtasks"]
    assert chain == list(env.get_task(task).prerequisites) + [task] and len(chain) >= 6
    out = capsys.readouterr().out
    assert "curriculum: collect_wood -> place_table" in out  # 3000 steps / 6+ sub-tasks: 500 each at most
    summary = (d / "summary.md").read_text()
    assert "Success per sub-task" in summary and "| iteration | episodes | " + " | ".join(chain) + " |" in summary
    rows = [json.loads(x) for x in (d / "stats.jsonl").read_text().splitlines()]
    assert rows  # episodes end here by death (the task's step limit is longer than the run)
    for k in sorted({r["iteration"] for r in rows}):  # a row per iteration, from the iteration's own episodes
        n = sum(r["iteration"] == k for r in rows)  # (the shares' arithmetic: test_curriculum, on hand-made rows)
        assert re.search(rf"^\| {k} \| {n} \|( [01]\.\d\d \|){{{len(chain)}}}$", summary, re.M), (k, n)


def test_over_http_without_hand_written_the_critic_gets_no_variant_and_no_hand_written_code_runs(tmp_path, monkeypatch,
                                                                                             capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeLLMServer(script) as srv:
        assert train.main(SMALL + ["--task", "collect_wood", "--llm", "http", "--llm-url", srv.url, "--llm-model",
                                   "fake", "--iterations", "2", "--total-steps", "1000",
                                   "--runs-dir", str(tmp_path)]) == 0
        critic_asked = [r.json["messages"][-1]["content"] for r in srv.requests
                        if r.json["messages"][0]["content"].startswith("You are the critic")]
    assert '"variants"' not in critic_asked[0]  # not offered ...
    assert "this run uses no hand-written code" in critic_asked[1]  # ... and refused when asked for anyway
    history = torch.load(run_dir(tmp_path) / "checkpoint.pt", weights_only=False)["extra"]["history"]
    assert [h["code_actions"] for h in history] == [["chop_tree"], ["chop_tree"]]
    assert [h["hand_written"] for h in history] == [[], []]
    assert "hand-written variant" not in capsys.readouterr().out

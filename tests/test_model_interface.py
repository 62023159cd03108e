"""What a model can say and see: the initiation conditions a plan (and the critic) can give, how each code
action's calls ended as the critic and the code writer read it, where a function will be called, and what each
mode's critic is offered (and --show-prompt prints). Run: python -m pytest -q tests/test_model_interface.py
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

import critic
import train
from bench.ablation import iterations
from code_actions import ActionSet
from core import CodeAction, Plan, SubAction, api_doc, can_start
from critic import Feedback, apply_feedback
from env import CrafterAPI, get_task
from fast_agent import FastAgent
from llm import LLMClient
from prompts.critic import NOOP_CHARGED, NOOP_FREE, NOOP_ORDER, feedback_schema
from prompts.planner import plan_schema
from reference import plans, skills
from slow_agent import SlowAgent, critic_messages
from tests.fake_llm import FakeLLMServer, text_of

DOC = api_doc(CrafterAPI)
SMALL = ["--num-envs", "4", "--num-steps", "64", "--eval-episodes", "2", "--no-capture-video", "--skills", "none",
         "--seed", "3"]
WANTED = {"in_view_any": ["tree"], "inventory_below": {"wood": 5}}  # what the scripted critic asks for chop_tree


def plan_with(initiation: dict, how: str = "code") -> dict:
    return {"task": "collect_wood", "subtasks": [], "rl_config": {},
            "subactions": [{"name": "chop", "how": how, "spec": "s", "reason": "", "initiation": initiation}]}


# ----------------------------------------------------------------------------------------------
# Initiation conditions: what a plan may say, and what it means.


def test_held_fewer_than_and_any_of_in_view_decide_where_a_code_action_may_start():
    init = {"inventory": {"wood": 1}, "inventory_below": {"wood_pickaxe": 1}, "in_view_any": ["table", "tree"]}
    assert can_start(init, {"wood": 1}, {"table"}) and can_start(init, {"wood": 1}, {"tree", "cow"})
    assert not can_start(init, {"wood": 1, "wood_pickaxe": 1}, {"table"})  # the tool is held already
    assert not can_start(init, {"wood": 1}, {"cow"})  # none of them in view
    assert not can_start(init, {"wood": 0}, {"table"})
    assert not can_start({"not_in_view": ["table"], "inventory": {"wood": 1}}, {"wood": 1}, {"table", "tree"})
    assert can_start({"not_in_view": ["table"], "inventory": {"wood": 1}}, {"wood": 1}, {"tree"})
    assert can_start({"inventory_below": {"energy": 6}}, {"energy": 5}, None)  # a game without a view
    assert not can_start({"inventory_below": {"energy": 6}}, {"energy": 6}, None)


@pytest.mark.parametrize("initiation, error", [
    ({"inventory": {"wood": 3}, "inventory_below": {"wood": 2}},
     "chop.initiation can never hold: it asks for at least 3 wood and fewer than 2"),
    ({"inventory_below": {"wood": 0}},
     "chop.initiation.inventory_below['wood'] = 0 must be a whole number of at least 1"),
    ({"inventory_below": {"gold": 1}}, "chop.initiation.inventory_below: 'gold' is not an inventory item"),
    ({"in_view_any": []}, "chop.initiation.in_view_any is empty"),
    ({"in_view_any": ["oak"]}, "chop.initiation.in_view_any: 'oak' is not a cell name"),
    ({"in_view_any": "tree"}, "in_view, in_view_any and not_in_view lists of names"),
    ({"in_view": ["table"], "not_in_view": ["table"]}, "can never hold: ['table'] must be in view and not in view"),
    ({"in_view_any": ["cow", "zombie"], "not_in_view": ["zombie", "cow"]},
     "can never hold: ['cow', 'zombie'] must be in view and not in view"),
])
def test_an_initiation_off_the_menu_is_refused_in_words_the_model_can_act_on(initiation, error):
    with pytest.raises(ValueError) as raised:
        Plan.from_dict(plan_with(initiation), get_task("collect_wood"))
    assert error in str(raised.value)


def test_a_game_without_a_view_offers_inventory_below_but_no_view_names():
    task = dataclasses.replace(get_task("collect_wood"), cells=())  # as MineDojo's tasks are
    Plan.from_dict(plan_with({"inventory_below": {"wood": 2}}), task)
    with pytest.raises(ValueError, match=r"in_view_any is not on the menu \(only inventory, inventory_below\)"):
        Plan.from_dict(plan_with({"in_view_any": ["tree"]}), task)


def test_the_code_writer_is_told_where_its_function_will_be_called():
    reply = "```python\ndef chop(api):\n    return api.do()\n```"
    with FakeLLMServer([reply, reply]) as srv:
        FastAgent(client(srv)).write(SubAction("chop", "code", "Chop a tree.", initiation=WANTED), DOC)
        FastAgent(client(srv)).write(SubAction("chop", "code", "Chop a tree."), DOC)
    started, anywhere = text_of(srv.requests[0]), text_of(srv.requests[1])
    assert "calls it only in states where this holds when the call starts" in started
    assert "holds fewer than 5 wood; tree in view (at least one)" in started
    assert "It may be called in any state" in anywhere and "holds fewer than" not in anywhere


# ----------------------------------------------------------------------------------------------
# How calls ended, as the critic and the code writer read it.

ROW = {"chosen": 200, "share": 0.1, "success_rate": 0.2, "mean_steps": 1.5, "mean_reward": 0.1, "errors": [],
       "ends": {"true": 40, "false_at_once": 150, "false_after_steps": 0, "step_budget": 6, "episode_end": 4,
                "error": 0}}
STATS = {"task": "collect_wood", "mode": "rlgpt", "iteration": 1, "success_rate": 0.5, "success_episodes": 40,
         "code_actions": {"chop_tree": ROW}}


def client(srv) -> LLMClient:
    return LLMClient(srv.url, "fake", max_retries=0, sleep=lambda s: None)


def test_the_critic_and_the_code_writer_read_how_each_call_ended():
    feedback = {"summary": "s", "to_code": [], "to_rl": [], "fixes": {}}
    with FakeLLMServer([json.dumps(feedback)]) as srv:
        SlowAgent(client(srv)).critique(Plan.from_dict(plans.reference_plan("collect_wood")),
                                        [skills.SKILLS["chop_tree"]], STATS)
    ends = ("returned True (or the task got done during the call) 40, returned without True before taking any "
            "step 150, stopped at its step budget 6, stopped by the episode's end 4")
    assert f"calls ended: {ends}; errors: none" in text_of(srv.requests[0])
    with FakeLLMServer(["```python\n" + skills.SKILLS["chop_tree"].source + "\n```"]) as srv:
        FastAgent(client(srv)).write(SubAction("chop_tree", "code", "Chop."), DOC, current=skills.SKILLS["chop_tree"],
                                     stats=ROW)
    assert f"how its calls ended, with their number: {ends};" in text_of(srv.requests[0])


# ----------------------------------------------------------------------------------------------
# The critic may replace an initiation; it is measured like its other moves.


def test_the_critics_initiation_replaces_the_plans_and_one_off_the_menu_goes_back_to_it():
    plan = Plan.from_dict(plans.reference_plan("collect_wood"), get_task("collect_wood"))
    rl_sub = next(s.name for s in plan.subactions if s.how == "rl")
    bad = {"summary": "s", "to_code": [], "to_rl": [], "fixes": {}, "initiations": {rl_sub: {"in_view": ["tree"]}}}
    good = {**bad, "to_code": [rl_sub], "initiations": {"chop_tree": WANTED, rl_sub: {"in_view": ["cow"]}}}
    with FakeLLMServer([json.dumps(bad), json.dumps(good)]) as srv:
        fb = SlowAgent(client(srv)).critique(plan, [skills.SKILLS["chop_tree"]], STATS)
    first = text_of(srv.requests[0])
    assert '"initiations": {code sub-action name: its new initiation condition' in first
    assert "chop_tree (code): " in first and "It may start only when: tree in view." in first  # the plan's, shown
    assert f"sub-action {rl_sub!r} has an initiation; only a \"code\" sub-action may" in text_of(srv.requests[1])
    new = apply_feedback(plan, fb)
    assert {s.name: s.initiation for s in new.code_subactions} == {"chop_tree": WANTED, rl_sub: {"in_view": ["cow"]}}
    assert Feedback.from_dict(fb.to_dict()) == fb  # as a run directory keeps it
    replanned = SlowAgent(None).plan(get_task("collect_wood"), DOC, feedback=fb, previous=plan)  # the reference's
    assert next(s for s in replanned.subactions if s.name == "chop_tree").initiation == WANTED


def script(request: dict) -> str:
    """A planner that follows the critic's initiation once it has been given, and a critic that gives one."""
    system, user = request["messages"][0]["content"], request["messages"][-1]["content"]
    if system.startswith("You are the slow agent"):
        plan = plans.reference_plan("collect_wood")
        if "holds fewer than 5 wood" in user:  # the previous plan, with the critic's initiation, is shown
            next(s for s in plan["subactions"] if s["name"] == "chop_tree")["initiation"] = WANTED
        return json.dumps(plan)
    if system.startswith("You are the critic"):
        return json.dumps({"summary": "s", "to_code": [], "to_rl": [], "fixes": {},
                           "initiations": {"chop_tree": WANTED}, "reasons": ["chop_tree: called with no tree"]})
    return "```python\n" + skills.SKILLS["chop_tree"].source + "\n```"


@pytest.mark.parametrize("worse", [False, True])
def test_an_initiation_the_critic_changes_makes_a_new_version_kept_or_rolled_back_by_the_rule(tmp_path, monkeypatch,
                                                                                             worse):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setattr(critic, "keep_change", lambda previous, current: (not worse, f"TEST-SAYS-WORSE={worse}"))
    with FakeLLMServer(script) as srv:
        assert train.main(SMALL + ["--task", "collect_wood", "--llm", "http", "--llm-url", srv.url, "--llm-model",
                                   "fake", "--iterations", "3", "--total-steps", "1500",
                                   "--runs-dir", str(tmp_path)]) == 0
    (d,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    saved = torch.load(d / "checkpoint.pt", weights_only=False)
    history = saved["extra"]["history"]
    assert history[1]["change"] == f"TEST-SAYS-WORSE={worse}"
    assert [h["code_actions"] for h in history] == [["chop_tree"], ["chop_tree_v2"],
                                                    ["chop_tree" if worse else "chop_tree_v2"]]
    actions = {a["name"]: a for a in saved["code_actions"]}
    assert actions["chop_tree_v2"]["initiation"] == WANTED and actions["chop_tree"]["initiation"] != WANTED
    assert actions["chop_tree_v2"]["source"] == actions["chop_tree"]["source"]  # the same code, a new condition
    stats = json.loads((d / "iter_2" / "stats.json").read_text())["code_actions"]["chop_tree_v2"]
    assert sum(stats["ends"].values()) == stats["chosen"] > 0  # every call counted by how it ended ...
    assert iterations(d)[1]["code_actions"]["chop_tree_v2"]["ends"] == stats["ends"]  # ... in the results
    assert f"| 2 | chop_tree_v2 | {stats['chosen']} |" in (d / "summary.md").read_text()  # and the summary


# ----------------------------------------------------------------------------------------------
# --mode code: one routine, no RL; --show-prompt prints what each mode sends.


def test_the_whole_task_routines_critic_is_offered_only_fixes_and_told_what_its_calls_are(capsys):
    assert train.main(["--show-prompt", "--task", "crafter", "--mode", "code"]) == 0
    out = capsys.readouterr().out
    assert "========== planner ==========" not in out and "crafter_program.py" not in out
    assert "Write `solve_task`: Solve the whole task" in out
    critic_text = out.split("========== critic ==========")[1]
    assert "no RL runs in this mode" in critic_text and "RL agent" not in critic_text
    assert '"fixes": {routine name' in critic_text and "returned True, which its request defines" in critic_text
    for move in ('"to_code"', '"to_rl"', '"rl_config"', '"initiations"'):
        assert move not in critic_text, move
    schema = json.loads(critic_text.split("-----\n")[-1])
    assert schema["required"] == ["summary", "fixes"] and set(schema["properties"]) == {"summary", "fixes", "reasons"}
    asked = {"summary": "s", "fixes": {}, "to_rl": ["solve_task"]}
    with pytest.raises(ValueError, match=r"no RL runs in this mode, so only \"fixes\" can change the routine"):
        critic.check_feedback(Feedback.from_dict(asked), Plan("crafter", [], [SubAction("solve_task", "code", "s")]),
                              rl=False)


@pytest.mark.parametrize("mode, senders", [("rlgpt", ["planner", "fast agent", "critic"]),
                                           ("rl+config", ["planner", "critic"]), ("code", ["fast agent", "critic"]),
                                           ("rl", [])])
def test_show_prompt_prints_what_each_mode_sends(capsys, mode, senders):
    assert train.main(["--show-prompt", "--task", "make_wood_pickaxe", "--mode", mode]) == 0
    out = capsys.readouterr().out
    shown = [what for what in ("planner", "fast agent", "critic") if f"========== {what} ==========" in out]
    assert shown == senders
    if not senders:
        assert "sends no prompt at all (--mode rl is plain PPO" in out


def test_follow_order_is_on_the_whole_plans_menu_only_and_kept_only_when_true():
    """"follow_order" in the plan's rl_config: true is kept (and the reference crafter plan asks for it), false
    leaves the plan as before (no key), anything else is refused, and a sub-action's rl_config may not carry it."""
    base = {"task": "collect_wood", "subtasks": [], "subactions": [{"name": "chop", "how": "code", "spec": "s",
                                                                   "reason": "r"}]}
    plan = Plan.from_dict({**base, "rl_config": {"follow_order": True}}, get_task("collect_wood"))
    assert plan.rl_config == {"shaping": {}, "mask_actions": [], "follow_order": True}
    assert "follow_order" not in Plan.from_dict({**base, "rl_config": {"follow_order": False}}).rl_config
    with pytest.raises(ValueError, match="follow_order must be true or false"):
        Plan.from_dict({**base, "rl_config": {"follow_order": "yes"}})
    rl_sub = {"name": "explore", "how": "rl", "spec": "s", "reason": "r", "rl_config": {"follow_order": True}}
    with pytest.raises(ValueError, match="explore.rl_config.follow_order is not on the menu"):
        Plan.from_dict({**base, "subactions": [*base["subactions"], rl_sub], "rl_config": {}})
    assert plans.reference_plan("crafter")["rl_config"]["follow_order"] is True


def test_plan_order_puts_a_rewritten_code_action_in_its_sub_actions_place():
    """ActionSet.plan_order: the code actions in use in the plan's order, a v2 where its sub-action stands (the
    order PPO is taught), an action the plan no longer uses left out."""
    plan = Plan.from_dict({"task": "collect_wood", "subtasks": [], "rl_config": {}, "subactions": [
        {"name": n, "how": "code", "spec": "s", "reason": "r"} for n in ("first", "second", "third")]})
    actions = ActionSet()
    for n in ("first", "second", "third"):
        actions.add(n, CodeAction(n, f"def {n}(api):\n    return True\n", "d", n))
    actions.add("first", CodeAction("first", "def first(api):\n    return False\n", "d", "first"))
    assert [a.name for a in actions.actions] == ["first", "second", "third", "first_v2"]
    assert actions.plan_order(plan) == [3, 1, 2]
    actions.keep_only({"first", "third"})
    assert actions.plan_order(plan) == [3, 2]


def test_the_critic_is_told_what_a_call_that_takes_no_step_costs_under_the_run_it_reads():
    """Where the RL agent chooses, a call that returns at once costs no step under every plan (and under
    follow_order one that fails after steps is masked for a decision): the critic's definition of "primitive steps
    per call" says so; under --mode code, where a routine is called on every decision, the noop charge."""
    plan = Plan.from_dict(plans.reference_plan("crafter"), get_task("crafter"))
    text = critic_messages(plan, [], {"iteration": 1}, hand_written=False)[-1]["content"]
    assert NOOP_FREE + NOOP_ORDER in text
    plan.rl_config.pop("follow_order")
    text = critic_messages(plan, [], {"iteration": 1}, hand_written=False)[-1]["content"]
    assert NOOP_FREE in text and NOOP_ORDER not in text and NOOP_CHARGED not in text
    text = critic_messages(plan, [], {"iteration": 1, "mode": "code"}, hand_written=False)[-1]["content"]
    assert NOOP_CHARGED in text and NOOP_FREE not in text


def test_the_reply_schemas_offer_an_initiations_view_tests_only_where_the_api_has_a_view():
    view_keys = {"in_view", "in_view_any", "not_in_view"}
    for view in (True, False):
        plan = plan_schema(reuse=False, view=view)["properties"]["subactions"]["items"]["properties"]
        critique = feedback_schema(variants=False, view=view)["properties"]["initiations"]["additionalProperties"]
        for initiation in (plan["initiation"]["properties"], critique["properties"]):
            assert (view_keys <= set(initiation)) == view and "inventory_below" in initiation
    assert "reuse" in plan_schema(reuse=True, view=False)["properties"]["subactions"]["items"]["properties"]


def test_under_follow_order_the_critic_reads_how_closely_the_rl_agent_kept_to_the_order():
    """Is it RL or the taught order that chooses? Under a plan with follow_order the critic reads at how many
    decisions the order named a code action, how often the agent chose it, and the lesson's weight; with no order
    taught (evidence.critic_stats' "order" None) no such line."""
    plan = Plan.from_dict(plans.reference_plan("crafter"), get_task("crafter"))
    order = {"named": 41203, "followed": 41037, "share": 0.996, "teacher_coef": [0.667, 0.334]}
    text = critic_messages(plan, [], {"iteration": 2, "decisions": 45120, "order": order},
                           hand_written=False)[-1]["content"]
    assert "at 41203 of the RL agent's 45120 decisions the order named a code action" in text
    assert "the agent chose that one at 41037 of them (share 0.996)" in text
    assert "weighed 0.667 at this iteration's first update and 0.334 at its last" in text
    assert "the plan's order (" not in critic_messages(plan, [], {"iteration": 2, "decisions": 45120, "order": None},
                                                       hand_written=False)[-1]["content"]


def test_on_crafter_the_critic_reads_the_score_and_no_number_that_counts_successes():
    """`crafter` has no goal: no episode succeeds, so success rates, per-update successes, "failed" episodes and
    what "successful" ones gathered would be zeros and contradictions to a model; it reads the training and the
    evaluation score, each with its standard error and n, instead. A task with a goal keeps those numbers."""
    ends = {"failed_episodes": 27, "ends": {"died: zombie": 18, "died: arrow": 9}}
    stats = {"iteration": 1, "success_rate": 0.0, "success_episodes": 27, "success_trend": [0.0, 0.0], "ends": ends,
             "episode_lengths": {"episodes": 27, "mean_length": 266.9, "successes": 0},
             "score": {"score": 35.84, "se": 5.18, "episodes": 27,
                       "achievements": {"collect_wood": 1.0, "eat_plant": 0.0}},
             "eval_score": {"score": 51.3, "se": 4.5, "episodes": 8}, "eval_episodes": 8, "eval_mean_length": 309.6}
    on = {task: critic_messages(Plan.from_dict(plans.reference_plan(task), get_task(task)), [],
                                {**stats, "task": task}, hand_written=False)[-1]["content"]
          for task in ("crafter", "collect_wood")}
    assert "Crafter score: 35.84, standard error 5.18 (bootstrap over the 27 episodes)" in on["crafter"]
    assert "evaluation, apart from training: Crafter score 51.3, standard error 4.5 (bootstrap over the 8 episodes)" \
        in on["crafter"]
    assert "collect_wood 1.0, eat_plant 0.0" in on["crafter"]
    assert "of 27: died: zombie 18, died: arrow 9" in on["crafter"]
    for counts_successes in ("success rate:", "success per", "failed training episodes", "successful training",
                             "none succeeded", "evaluation, apart from training: success"):
        assert counts_successes not in on["crafter"] and counts_successes in on["collect_wood"]
    plan = Plan.from_dict(plans.reference_plan("crafter"), get_task("crafter"))
    empty = critic_messages(plan, [], {"iteration": 1, "task": "crafter"}, hand_written=False)[-1]["content"]
    assert "each ends in one of these): not measured (no episode finished)" in empty and "failed" not in empty

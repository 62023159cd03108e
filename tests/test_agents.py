"""The slow agent (planner and critic) driven through a scripted HTTP LLM server, and the reference backends
of both agents (tests/test_fast_agent.py drives the fast agent).

    python -m pytest -q tests/test_agents.py
"""

from __future__ import annotations

import json

import pytest

from core import CodeAction, Plan, SubAction, api_doc
from critic import Feedback
from env import TASKS, CrafterAPI, get_task
from fast_agent import Attempt, FastAgent
from prompts.planner import SUBTASKS_LONG, SUBTASKS_SHORT
from reference import plans, skills
from reference.critic_rules import rule_based_critique
from slow_agent import CRITIQUE_REPLY_TOKENS, PLAN_REPLY_TOKENS, AgentError, SlowAgent
from tests.fake_llm import FakeLLMServer, client, text_of, truncated

DOC = api_doc(CrafterAPI)


def images_of(request) -> list[str]:
    return [p["image_url"]["url"] for m in request.json["messages"] if isinstance(m["content"], list)
            for p in m["content"] if p.get("type") == "image_url"]


def plan_json(**changes) -> str:
    plan = {"subtasks": [],
            "subactions": [{"name": "find_tree", "how": "rl", "spec": "Walk until a tree is visible.",
                            "reason": "exploring needs trial and error"},
                           {"name": "chop_tree", "how": "code", "spec": "Walk to the tree and chop it.",
                            "reason": "a clear procedure"}],
            "rl_config": {"shaping": {"wood": 0.5}, "mask_actions": ["place_stone"]}}
    plan.update(changes)
    return json.dumps(plan)


# ----------------------------------------------------------------------------------------------
# Slow agent: planning and repairs.


def test_plan_with_schema_error_is_repaired_after_the_error_is_fed_back():
    bad = json.dumps({"subtasks": [], "rl_config": {}})  # no "subactions"
    with FakeLLMServer([bad, plan_json()]) as srv:
        plan = SlowAgent(client(srv)).plan(get_task("collect_wood"), DOC)
    assert len(srv.requests) == 2
    error = "'subactions' is a required property"
    assert error not in text_of(srv.requests[0])
    assert error in srv.requests[1].json["messages"][-1]["content"]
    assert srv.requests[1].json["messages"][-2] == {"role": "assistant", "content": bad}
    assert [s.name for s in plan.subactions] == ["find_tree", "chop_tree"]
    assert [s.name for s in plan.code_subactions] == ["chop_tree"]
    assert plan.task == "collect_wood" and plan.rl_config["shaping"] == {"wood": 0.5}


BAD_PLANS = {
    "duplicate names": ({"subactions": [{"name": "chop", "how": "code", "spec": "a", "reason": ""}] * 2},
                        "duplicate sub-action names ['chop']"),
    "unknown how": ({"subactions": [{"name": "chop", "how": "python", "spec": "a", "reason": ""}]},
                    "'python' is not one of ['code', 'rl']"),
    "not snake_case": ({"subactions": [{"name": "ChopTree", "how": "code", "spec": "a", "reason": ""}]},
                       "'ChopTree' is not snake_case"),
    "unknown item": ({"rl_config": {"shaping": {"logs": 0.5}}}, "'logs' is not an inventory item"),
    "weight too big": ({"rl_config": {"shaping": {"wood": 50}}}, "must be a number from 0.0 to 1.0"),
    "unknown action": ({"rl_config": {"mask_actions": ["jump"]}}, "'jump' is not a base action"),
    "free code": ({"rl_config": {"reward_fn": "lambda obs: 1"}}, "rl_config.reward_fn is not on the menu"),
    "initiation on rl": ({"subactions": [{"name": "explore", "how": "rl", "spec": "a", "reason": "",
                                          "initiation": {"inventory": {"wood": 1}}}]},
                         "sub-action 'explore' has an initiation; only a \"code\" sub-action may"),
    "initiation item": ({"subactions": [{"name": "chop", "how": "code", "spec": "a", "reason": "",
                                         "initiation": {"inventory": {"logs": 1}}}]},
                        "chop.initiation.inventory: 'logs' is not an inventory item"),
    "initiation cell": ({"subactions": [{"name": "chop", "how": "code", "spec": "a", "reason": "",
                                         "initiation": {"in_view": ["oak"]}}]},
                        "chop.initiation.in_view: 'oak' is not a cell name"),
    "initiation key": ({"subactions": [{"name": "chop", "how": "code", "spec": "a", "reason": "",
                                        "initiation": {"health_below": 3}}]},
                       "chop.initiation.health_below is not on the menu (only inventory, inventory_below, in_view, "
                       "in_view_any, not_in_view)"),
}


@pytest.mark.parametrize("case", list(BAD_PLANS))
def test_invalid_plan_goes_back_with_its_bad_reply_and_the_exact_error(case):
    changes, error = BAD_PLANS[case]
    bad = plan_json(**changes)
    with FakeLLMServer([bad, plan_json()]) as srv:
        plan = SlowAgent(client(srv)).plan(get_task("collect_wood"), DOC)
    messages = srv.requests[1].json["messages"]
    assert error in messages[-1]["content"]
    assert messages[-2] == {"role": "assistant", "content": bad}
    assert plan.subactions[1].name == "chop_tree"


def test_plan_fails_clearly_after_max_repairs():
    bad = plan_json(rl_config={"shaping": {"logs": 0.5}})
    with FakeLLMServer(lambda body: bad) as srv:
        with pytest.raises(AgentError, match="after 2 repair.*'logs' is not an inventory item"):
            SlowAgent(client(srv), max_repairs=2).plan(get_task("collect_wood"), DOC)
    assert len(srv.requests) == 3


def test_a_garbled_plan_reaches_the_user_as_the_problem_and_the_reply_not_as_model_instructions():
    with FakeLLMServer(lambda body: "I would rather chat about trees, if that is fine.") as srv:
        agent = SlowAgent(client(srv), max_repairs=1)
        with pytest.raises(AgentError) as e:
            agent.plan(get_task("collect_wood"), DOC)
    msg = str(e.value)
    assert "Reply with" not in msg and "Your reply" not in msg  # those words were for the model
    assert "not valid JSON" in msg and "'I would rather chat about trees" in msg
    assert len(agent.last_rejections) == 2 and all("Reply" not in r for r in agent.last_rejections)
    assert "Reply with only the JSON value" in srv.requests[1].json["messages"][-1]["content"]


def test_sloppy_plan_json_is_accepted_without_a_repair_round():
    sloppy = plan_json().replace('"', "'").replace("]}", "],}") + "  // done"
    with FakeLLMServer([sloppy]) as srv:
        plan = SlowAgent(client(srv)).plan(get_task("collect_wood"), DOC)
    assert len(srv.requests) == 1 and [s.name for s in plan.subactions] == ["find_tree", "chop_tree"]


def test_long_chain_task_must_list_its_subtasks_first():
    chain = list(get_task("collect_diamond").prerequisites) + ["collect_diamond"]
    with FakeLLMServer([plan_json(), plan_json(subtasks=chain)]) as srv:
        plan = SlowAgent(client(srv)).plan(get_task("collect_diamond"), DOC)
    assert SUBTASKS_LONG in text_of(srv.requests[0])
    assert "long prerequisite chain" in srv.requests[1].json["messages"][-1]["content"]
    assert plan.subtasks == chain
    with FakeLLMServer([plan_json()]) as srv:
        SlowAgent(client(srv)).plan(get_task("collect_wood"), DOC)
    assert SUBTASKS_SHORT in text_of(srv.requests[0]) and SUBTASKS_LONG not in text_of(srv.requests[0])


def test_replan_shows_the_previous_plan_and_the_critics_feedback():
    previous = Plan.from_dict({**json.loads(plan_json()), "task": "collect_wood"})
    feedback = Feedback("the agent hit the ground instead of the tree", ["find_tree"], [],
                        {"chop_tree": "face the tree before `do`"})
    with FakeLLMServer([plan_json()]) as srv:
        SlowAgent(client(srv)).plan(get_task("collect_wood"), DOC, feedback, previous)
    text = text_of(srv.requests[0])
    assert "the agent hit the ground instead of the tree" in text and "face the tree before" in text
    assert "Walk to the tree and chop it." in text  # the previous plan's spec
    assert "api.go_to(" in text and "make_iron_pickaxe" in text  # the API doc and the base actions


def test_replan_leaves_out_the_spec_of_a_sub_action_the_critic_moved_and_says_how_code_is_kept():
    previous = Plan.from_dict({**json.loads(plan_json()), "task": "collect_wood"})
    feedback = Feedback("chopping is better learned", [], ["chop_tree"], {})
    with FakeLLMServer([plan_json()]) as srv:
        SlowAgent(client(srv)).plan(get_task("collect_wood"), DOC, feedback, previous)
    text = text_of(srv.requests[0])
    assert "Walk to the tree and chop it." not in text  # chop_tree's code spec, now under "rl"
    assert "- chop_tree (rl): moved to rl by the critic; its old spec was written for code" in text
    assert "Walk until a tree is visible." in text  # find_tree did not move
    assert "keeps its name keeps the code accepted for it as it is" in text  # how to keep a code action


def test_reuse_is_offered_only_with_a_skill_library_and_keeping_a_name_is_the_way_without():
    with FakeLLMServer([plan_json()]) as srv:
        SlowAgent(client(srv)).plan(get_task("collect_wood"), DOC)
    assert "reuse" not in json.dumps(srv.requests[0].json)  # neither the prompt nor the schema offers it
    reused = json.loads(plan_json())
    reused["subactions"][1]["reuse"] = True
    with FakeLLMServer([json.dumps(reused), plan_json()]) as srv:
        SlowAgent(client(srv)).plan(get_task("collect_wood"), DOC)
    repair = srv.requests[1].json["messages"][-1]["content"]
    assert "this run has no skill library" in repair and "keeps its name keeps its accepted code" in repair
    agent = SlowAgent(None)
    agent.llm, agent.catalogue = None, {"chop_tree": "Chop a tree."}
    with FakeLLMServer([json.dumps(reused)]) as srv:
        agent.llm = client(srv)
        assert agent.plan(get_task("collect_wood"), DOC).subactions[1].reuse
    text = json.dumps(srv.requests[0].json)
    assert '\\"reuse\\": true' in text and "checked again" in text and '"reuse": {"type": "boolean"}' in text


def test_the_planner_is_told_specs_stand_alone_and_success_must_be_observable():
    with FakeLLMServer([plan_json()]) as srv:
        SlowAgent(client(srv)).plan(get_task("collect_wood"), DOC)
    text = text_of(srv.requests[0])
    assert "each spec must stand alone" in text and "never sees the other sub-actions" in text
    assert "success test must be observable through the API" in text and "one call's step budget" in text
    assert "it has taken 64 environment steps" in text  # the budget, from the API doc


def test_on_crafter_the_planner_reads_the_chain_form_and_what_measures_the_benchmark():
    with FakeLLMServer([plan_json(subtasks=["collect_wood", "place_table"])]) as srv:
        plan = SlowAgent(client(srv)).plan(get_task("crafter"), DOC)
    text = text_of(srv.requests[0])
    assert SUBTASKS_SHORT not in text and "list a chain of achievements to learn first" in text
    assert "reached in 60% of the last 100 finished episodes" in text and "pays 0.5" in text
    assert "never the current sub-task's" in text  # which success rate the numbers are
    assert "every success rate of this task is 0.0 by definition" in text and "Crafter's score" in text
    assert plan.subtasks == ["collect_wood", "place_table"]


def test_plan_dict_round_trip():
    plan = Plan.from_dict({**json.loads(plan_json()), "task": "collect_wood"})
    assert Plan.from_dict(plan.to_dict()) == plan
    fb = Feedback("s", ["a"], ["b"], {"b": "fix"})
    assert Feedback.from_dict(fb.to_dict()) == fb


# ----------------------------------------------------------------------------------------------
# Slow agent: the critic.

PLAN = Plan.from_dict({**json.loads(plan_json()), "task": "collect_wood"})
STATS = {"task": "collect_wood", "iteration": 2, "env_steps": 48128, "success_rate": 0.137,
         "success_trend": [0.021, 0.064, 0.137], "eval_mean_length": 211.5,
         "code_actions": {"chop_tree": {"chosen": 4321, "share": 0.083, "success_rate": 0.412,
                                        "mean_steps": 23.75, "mean_reward": 0.875,
                                        "errors": [["line 3: ZeroDivisionError: division by zero", 17],
                                                   ["stopped: step budget", 5]]}}}
FEEDBACK = json.dumps({"summary": "chop_tree divides by zero", "to_code": [], "to_rl": [],
                       "fixes": {"chop_tree": "guard the division"}})


def test_the_plan_prompt_offers_an_initiation_over_the_games_items_and_cells():
    with FakeLLMServer([plan_json()]) as srv:
        SlowAgent(client(srv)).plan(get_task("make_wood_pickaxe"), DOC)
    user = srv.requests[0].json["messages"][-1]["content"]
    assert ('"initiation": {"inventory": {item: held at least this many}, "inventory_below": {item: held fewer than '
            'this many}, "in_view": [names that must all be in the view], "in_view_any": [names of which at least one '
            'must be in the view], "not_in_view": [names none of which may be in the view]}') in user
    schema = srv.requests[0].json["response_format"]["json_schema"]["schema"]
    initiation = schema["properties"]["subactions"]["items"]["properties"]["initiation"]["properties"]
    assert set(initiation) == {"inventory", "inventory_below", "in_view", "in_view_any", "not_in_view"}
    assert "water, grass, stone, path, sand, tree" in user and "zombie, skeleton, arrow, plant, ripe_plant" in user
    assert "the options framework's initiation set" in user


def test_critic_prompt_contains_the_real_per_code_action_statistics():
    with FakeLLMServer([FEEDBACK]) as srv:
        fb = SlowAgent(client(srv)).critique(PLAN, [skills.skill_for("chop_tree")], STATS)
    text = text_of(srv.requests[0])
    for shown in ["48128", "0.137", "0.021, 0.064, 0.137", "211.5", "chosen 4321 times", "0.083", "0.412",
                  "23.75", "reward 0.875 per call", "line 3: ZeroDivisionError: division by zero", "x17", "x5"]:
        assert shown in text, shown
    assert fb.fixes == {"chop_tree": "guard the division"}


def test_critic_reply_naming_unknown_sub_actions_is_repaired():
    bad = json.dumps({"summary": "s", "to_code": ["fly"], "to_rl": [], "fixes": {}})
    versioned = json.dumps({"summary": "s", "to_code": [], "to_rl": [], "fixes": {"chop_tree_v2": "fix"}})
    with FakeLLMServer([bad, versioned]) as srv:
        fb = SlowAgent(client(srv)).critique(PLAN, [], STATS)
    assert "unknown sub-action names ['fly']" in srv.requests[1].json["messages"][-1]["content"]
    assert fb.fixes == {"chop_tree": "fix"}  # a code version's name is read as its sub-action's


# A full reply at 3 characters a token (JSON with English text runs about 3.5, so this errs long): within the cap.
def _tokens_at_most(reply: dict) -> float:
    return len(json.dumps(reply, indent=2)) / 3


def test_the_plan_cap_holds_a_full_plan_and_a_cut_plan_is_asked_for_again():
    sub = {"name": "make_stone_pickaxe_at_table", "how": "code", "spec": "s" * 600, "reason": "r" * 250,
           "subtask": "make_stone_pickaxe",
           "initiation": {"inventory": {"wood": 1, "stone": 1, "wood_pickaxe": 1}, "in_view": ["table", "stone"]}}
    full = {"subtasks": list(get_task("collect_diamond").prerequisites), "subactions": [sub] * 16,
            "rl_config": {"shaping": {"wood": 0.1, "stone": 0.1, "coal": 0.2, "iron": 0.5}, "mask_actions": ["noop"]}}
    for reply in (full, plans.reference_plan("collect_diamond")):  # the longest plan the tests script: 16 sub-actions
        assert _tokens_at_most(reply) <= PLAN_REPLY_TOKENS
    with FakeLLMServer([truncated(plan_json()[:80]), plan_json()]) as srv:
        plan = SlowAgent(client(srv)).plan(get_task("collect_wood"), DOC)
    assert [r.json["max_tokens"] for r in srv.requests] == [PLAN_REPLY_TOKENS] * 2  # what is sent
    assert f"cut off at the {PLAN_REPLY_TOKENS}-token limit" in srv.requests[1].json["messages"][-1]["content"]
    assert [s.name for s in plan.subactions] == ["find_tree", "chop_tree"]


def test_the_critique_cap_holds_a_full_critique_and_a_cut_one_is_asked_for_again():
    full = {"summary": "s" * 800, "to_code": ["a" * 20] * 3, "to_rl": ["b" * 20] * 3,
            "fixes": {f"code_action_{i:02d}": "f" * 500 for i in range(16)},  # a fix for each of 16 code actions
            "rl_config": {"shaping": {"wood": 0.1, "stone": 0.1}, "mask_actions": ["noop"]},
            "reasons": ["r" * 160] * 22}
    assert _tokens_at_most(full) <= CRITIQUE_REPLY_TOKENS
    with FakeLLMServer([truncated(FEEDBACK[:40]), FEEDBACK]) as srv:
        fb = SlowAgent(client(srv)).critique(PLAN, [skills.skill_for("chop_tree")], STATS)
    assert [r.json["max_tokens"] for r in srv.requests] == [CRITIQUE_REPLY_TOKENS] * 2
    assert f"cut off at the {CRITIQUE_REPLY_TOKENS}-token limit" in srv.requests[1].json["messages"][-1]["content"]
    assert fb.fixes == {"chop_tree": "guard the division"}


def test_critic_shows_a_rewritten_code_actions_statistics_and_code_left_to_rl():
    plan = Plan.from_dict({**PLAN.to_dict(), "subactions": PLAN.to_dict()["subactions"] + [
        {"name": "drink", "how": "code", "spec": "s", "reason": ""}]})
    stats = dict(STATS, code_actions={"chop_tree_v2": STATS["code_actions"]["chop_tree"]})
    with FakeLLMServer([FEEDBACK]) as srv:
        SlowAgent(client(srv)).critique(plan, [CodeAction("chop_tree_v2", "", entry="chop_tree")], stats)
    text = text_of(srv.requests[0])
    assert "- chop_tree: chosen 4321 times" in text and "- drink: no code was accepted" in text


@pytest.mark.parametrize("vision", [False, True])
def test_frames_are_sent_only_to_a_vision_client(vision):
    frames = [b"\x89PNG frame one", b"\x89PNG frame two"]
    with FakeLLMServer([FEEDBACK]) as srv:
        SlowAgent(client(srv, vision=vision)).critique(PLAN, [], STATS, frames=frames)
    assert len(images_of(srv.requests[0])) == (2 if vision else 0)
    assert ("2 frames from failed episodes" in text_of(srv.requests[0])) == vision


def test_rule_based_critic_flags_failing_unused_and_missing_code():
    plan = Plan.from_dict({"task": "collect_wood", "subtasks": [], "rl_config": {}, "subactions": [
        {"name": n, "how": "code", "spec": "s", "reason": ""}
        for n in ("chop_tree", "drink", "sleep_now", "eat_cow")]})
    row = {"chosen": 40, "share": 0.1, "success_rate": 0.25, "mean_steps": 3.5,
           "errors": [["line 3: ZeroDivisionError: division by zero", 9], ["stopped: step_budget", 2]]}
    # train.py names a rewritten code action chop_tree_v2 and keys its statistics by that name;
    # drink was accepted but never chosen, so train.py has no statistics for it at all
    stats = dict(STATS, code_actions={"chop_tree_v2": row, "eat_cow": dict(row, errors=[])})
    accepted = [CodeAction("chop_tree_v2", "def chop_tree(api):\n    return True\n", entry="chop_tree"),
                CodeAction("drink", "def drink(api):\n    return True\n"),
                CodeAction("eat_cow", "def eat_cow(api):\n    return True\n")]
    fb = SlowAgent(None).critique(plan, accepted, stats)
    assert fb.summary.startswith("[hand-written rule-based critic")
    assert "11 of 40 calls" in fb.fixes["chop_tree"] and "ZeroDivisionError" in fb.fixes["chop_tree"]
    assert "drink was never chosen" in fb.summary
    assert "eat_cow returned True in only 0.25" in fb.summary  # low success without errors: no code fix
    assert set(fb.fixes) == {"chop_tree"}
    assert fb.to_rl == ["sleep_now"]  # no accepted code: it already ran as RL
    rare = dict(stats, code_actions={"chop_tree_v2": dict(row, errors=[["stopped: step_budget", 3]])})
    assert rule_based_critique(plan, accepted, rare).fixes == {}


# ----------------------------------------------------------------------------------------------
# Reference backends: no LLM anywhere.


def test_reference_slow_agent_plans_every_task():
    for name, task in TASKS.items():
        plan = SlowAgent(None).plan(task, DOC)
        assert plan.task == name and plan.subactions
        assert len(task.prerequisites) < plans.LONG_CHAIN or plan.subtasks, name
        assert all(skills.skill_for(s.name) for s in plan.code_subactions), name
        fb = Feedback("", [], [plan.code_subactions[0].name], {}) if plan.code_subactions else None
        if fb:
            replanned = SlowAgent(None).plan(task, DOC, fb, plan)
            assert replanned.subactions[plan.subactions.index(plan.code_subactions[0])].how == "rl"


def test_reference_fast_agent_returns_checked_skills(monkeypatch):
    agent = FastAgent(None)
    for name, skill in skills.SKILLS.items():
        assert agent.write(SubAction(name, "code", ""), DOC) is skill, (name, agent.last_attempts)
        assert agent.last_attempts == [Attempt(skill.source, None)]
    assert agent.write(SubAction("fly_to_the_moon", "code", ""), DOC) is None
    monkeypatch.setitem(skills.SKILLS, "broken", CodeAction("broken", "def broken(api):\n    return 1 / 0\n"))
    assert agent.write(SubAction("broken", "code", ""), DOC) is None  # same checks as model code
    assert "ZeroDivisionError" in agent.last_attempts[0].error

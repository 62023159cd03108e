"""Tests for the LLM critic's side of critic.py and slow_agent.py: its feedback parsed and repaired over the local
HTTP test server (tests/fake_llm.py), the menus and statistics it is shown, `--show-prompt`, a prose-only model's
error, and the skill library and code statistics an LLM run is offered. The rule-based critic: tests/test_critic.py.

    python -m pytest -q tests/test_critic_llm.py
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import train
from code_actions import CodeStats, reuse_skill
from core import CodeAction
from critic import Feedback, apply_feedback
from env import get_task
from evidence import episode_measures
from llm import LLMClient
from reference import skills
from skill_library import SkillLibrary
from slow_agent import AgentError, SlowAgent, plan_messages
from tests.critic_helpers import reference, row, stats_with
from tests.fake_llm import FakeLLMServer

# ----------------------------------------------------------------------------------------------
# An LLM critic's JSON goes through the same path.

PLAN_WOOD = reference("collect_wood")
STATS = stats_with({"chop_tree": row(200, 0.1)})


def critique_via_http(*replies: dict, hand_written: bool = True) -> tuple[Feedback, FakeLLMServer]:
    with FakeLLMServer([json.dumps(r) for r in replies]) as srv:
        client = LLMClient(srv.url, "fake", max_retries=0, sleep=lambda s: None)
        fb = SlowAgent(client, hand_written=hand_written).critique(PLAN_WOOD, [skills.SKILLS["chop_tree"]], STATS)
    return fb, srv


def test_llm_feedback_with_and_without_the_acting_fields_parses_the_same_way():
    old = {"summary": "s", "to_code": [], "to_rl": [], "fixes": {"chop_tree": "look first"}}
    fb, srv = critique_via_http(old)
    assert fb == Feedback("s", [], [], {"chop_tree": "look first"})
    search = skills.variants("chop_tree")["search"].doc.removeprefix(skills.LABEL)
    assert f'chop_tree: "reference": {skills.SKILLS["chop_tree"].doc.removeprefix(skills.LABEL)}; "search": {search}' \
        in srv.requests[0].json["messages"][-1]["content"]  # what each variant does, not just its name
    new = {**old, "variants": {"chop_tree_v2": "search"}, "rl_config": {"shaping": {"wood": 0.2}},
           "reasons": ["chop_tree: it is called with no tree in view"]}
    fb, _ = critique_via_http(new)
    assert fb.variants == {"chop_tree": "search"} and fb.rl_config == {"shaping": {"wood": 0.2}}
    assert fb == Feedback.from_dict(fb.to_dict())  # as a run directory stores and reads it
    assert apply_feedback(PLAN_WOOD, fb).rl_config["shaping"] == {"wood": 0.2}


def test_llm_feedback_asking_for_a_missing_variant_or_config_is_repaired():
    bad_variant = {"summary": "s", "to_code": [], "to_rl": [], "fixes": {}, "variants": {"chop_tree": "fly"}}
    bad_config = {**bad_variant, "variants": {}, "rl_config": {"shaping": {"wood": 5}}}
    good = {**bad_variant, "variants": {"chop_tree": "search"}}
    fb, srv = critique_via_http(bad_variant, bad_config, good)
    repairs = [srv.requests[i].json["messages"][-1]["content"] for i in (1, 2)]
    assert "chop_tree has no variant 'fly' (it has ['reference', 'search'])" in repairs[0]
    assert "rl_config.shaping['wood'] = 5 must be a number from 0.0 to 1.0" in repairs[1]
    assert fb.variants == {"chop_tree": "search"}


def test_an_llm_run_is_offered_no_hand_written_variant_and_one_asked_for_is_refused():
    asked = {"summary": "s", "to_code": [], "to_rl": [], "fixes": {}, "variants": {"chop_tree": "reference"}}
    fb, srv = critique_via_http(asked, {**asked, "variants": {}}, hand_written=False)
    first = srv.requests[0].json["messages"][-1]["content"]
    assert '"variants"' not in first and "skills.py" in first  # skills.py: the code in use is labelled
    assert "this run uses no hand-written code" in srv.requests[1].json["messages"][-1]["content"]
    assert fb.variants == {}


def test_the_critic_is_shown_both_menus_it_may_choose_from():
    _, srv = critique_via_http({"summary": "s", "to_code": [], "to_rl": [], "fixes": {}})
    text = srv.requests[0].json["messages"][-1]["content"]
    assert '"shaping": {inventory item: reward per unit gained, 0.0 to 1.0} with items from health, food' in text
    assert "from noop, move_left" in text and "planner's menu" not in text and "listed above" not in text

# ----------------------------------------------------------------------------------------------
# What the LLM critic reads, and what it sends on.


def test_the_critic_reads_training_lengths_and_ends_with_their_n_apart_from_the_evaluation():
    stats = {**STATS, "iteration_steps": [0, 48128], "eval_mean_length": 57.5, "eval_episodes": 8,
             "episode_lengths": episode_measures([(15, True)] * 850 + [(300, False)] * 31),
             "ends": {"failed_episodes": 31, "ends": {"time limit": 20, "died: zombie": 11}},
             "gathered": {"successes": 850, "items": {"wood": {"mean": 1.2, "uses": 1, "by": "collect_wood"}}}}
    with FakeLLMServer([json.dumps({"summary": "s", "to_code": [], "to_rl": [], "fixes": {}})]) as srv:
        SlowAgent(LLMClient(srv.url, "fake", max_retries=0)).critique(PLAN_WOOD, [skills.SKILLS["chop_tree"]], stats)
    text = srv.requests[0].json["messages"][-1]["content"]
    assert "training episode length (env steps): mean 25.0 over all 881; the 850 successful ones: mean 15.0" in text
    assert "how the failed training episodes ended (episodes each): of 31: time limit 20, died: zombie 11" in text
    assert "against the units the chain's recipes and the success test need): over 850 successful episodes: " \
           "wood 1.2 (needs 1)" in text
    assert "evaluation, apart from training: success 0.0 and mean length 57.5 env steps over 8 episodes" in text
    assert "- reward per call: mean over calls of the rewards of the call's env steps, summed, not discounted" in text


def test_feedback_without_an_rl_config_reaches_the_next_plan_without_a_null():
    fb = Feedback.from_dict({"summary": "s", "to_code": [], "to_rl": [], "fixes": {}})
    text = plan_messages(get_task("collect_wood"), "API", fb, PLAN_WOOD)[-1]["content"]
    assert '"rl_config": null' not in text and "null" not in text.split("The critic's feedback")[-1]
    assert Feedback.from_dict(fb.to_dict()) == fb


def test_a_model_that_answers_prose_only_is_named_with_its_endpoint_in_the_error():
    with FakeLLMServer(["I think the agent should explore more."] * 3, model="prose-model") as srv:
        with pytest.raises(AgentError) as e:
            SlowAgent(LLMClient(srv.url, "prose-model", max_retries=0)).critique(PLAN_WOOD, [], STATS)
    assert srv.url in str(e.value) and "prose-model" in str(e.value) and "not valid JSON" in str(e.value)


def test_a_hand_written_skill_from_the_skill_library_is_reused_only_where_allowed():
    class FakeSkillLibrary:
        def reuse(self, name, check):
            return skills.SKILLS[name], "chop_tree-abc"

    assert reuse_skill(FakeSkillLibrary(), "chop_tree", None, 1, hand_written=True) is skills.SKILLS["chop_tree"]
    assert reuse_skill(FakeSkillLibrary(), "chop_tree", None, 1, hand_written=False) is None


def test_the_planner_of_an_llm_run_is_offered_no_hand_written_skill_from_the_skill_library(tmp_path):
    library = SkillLibrary(tmp_path, "crafter")
    library.seed()  # the reference skills, origin hand-written
    assert "chop_tree" in library.catalogue("collect_wood")
    assert library.catalogue("collect_wood", hand_written=False) == {}


def test_show_prompt_prints_what_the_planner_the_fast_agent_and_the_critic_send(capsys):
    """`train.py --show-prompt` builds the messages with the run's own settings, and sends nothing."""
    assert train.main(["--show-prompt", "--task", "collect_wood", "--num-envs", "4", "--max-macro-steps", "32"]) == 0
    out = capsys.readouterr().out
    parts = re.split(r"========== (planner|fast agent|critic) ==========", out)
    sent = dict(zip(parts[1::2], parts[2::2], strict=True))
    planner, fast, critic = sent["planner"], sent["fast agent"], sent["critic"]
    assert "You are the slow agent" in planner and "chop_tree" in fast and "You are the critic" in critic
    assert "training episode length (env steps)" in critic and "rollout of 128 decisions in each of 4 envs" in critic
    assert "32 environment steps" in fast and "32 environment steps" in planner
    assert '"variants"' not in critic  # an LLM run is offered none, in the prompt or the reply schema


def test_show_prompt_and_the_log_say_when_a_run_would_send_no_prompt(capsys, monkeypatch, tmp_path):
    """The reference backend (and --mode rl) send nothing: a prompt edit changes nothing there, and both say so."""
    for var in ("RLGPT_LLM_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    for argv, says in [([], "the reference backend"), (["--llm", "reference"], "the reference backend"),
                       (["--mode", "rl"], "--mode rl is plain PPO"),
                       (["--llm", "http", "--llm-url", "http://x/v1"], None)]:
        assert train.main(["--show-prompt", *argv]) == 0
        first = capsys.readouterr().out.splitlines()[0]
        assert first.startswith("NOTE: a run with these settings sends no prompt at all") == bool(says), argv
        assert says is None or says in first
    args, _, _ = train.parse_args(["--llm", "reference"])
    assert "no prompt is sent" in train.run_dir.make_llm(args, tmp_path)[2]  # what the log's "agents' backend" says


def test_code_stats_say_which_code_is_hand_written_and_collect_the_finished_episodes():
    from types import SimpleNamespace

    stats = CodeStats(SimpleNamespace(actions=[skills.SKILLS["chop_tree"], CodeAction("own", "", "model code")]))
    both, done = np.ones(2, bool), np.array([True, False])
    stats(np.array([17, 18]), {"code_action": np.array([0, 1]), "_code_action": both,
                               "final_info": {"episode": {"l": np.array([12, 0]), "success": np.array([True, False])},
                                              "_episode": done}})
    assert stats.summary()["chop_tree"]["hand_written"] and not stats.summary()["own"]["hand_written"]
    assert stats.episodes == [(12, True)]

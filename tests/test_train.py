"""train.py end to end on real Crafter with tiny budgets: the LLM side scripted over real HTTP."""

import contextlib
import dataclasses
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import cli
import train
from code_actions import ActionSet, grow_actions
from env import ACTIONS, CHOP_TREE, CodeAction
from policy import Agent
from ppo import PPO, PPOConfig
from run_dir import make_train_envs
from run_state import Run
from tests.fake_llm import FakeLLMServer, Fault, server_error

KEY = "sk-test-SECRET-never-written"
TINY = ["--task", "collect_wood", "--num-envs", "2", "--num-steps", "32", "--eval-episodes", "1",
        "--checkpoint-every", "300", "--max-macro-steps", "24", "--no-capture-video"]

PLAN_1 = {"subtasks": [], "rl_config": {"shaping": {"wood": 0.1}, "mask_actions": ["sleep"]}, "subactions": [
    {"name": "chop_tree", "how": "code", "spec": "Walk to the nearest visible tree and chop it.", "reason": "fixed"},
    {"name": "find_tree", "how": "rl", "spec": "Explore until a tree is visible.", "reason": "needs pixels"}]}
PLAN_2 = {"subtasks": [], "rl_config": {"shaping": {}, "mask_actions": []}, "subactions": PLAN_1["subactions"] + [
    {"name": "grab_sapling", "how": "code", "spec": "Face grass and collect a sapling.", "reason": "fixed"}]}
FEEDBACK = {"summary": "CRITIC-SAYS: the agent keeps chopping grass", "to_code": [], "to_rl": [],
            "fixes": {}}
BAD_CHOP = "```python\ndef chop_tree(api):\n    x = 0\n    return 1 / x\n```"
GOOD_CHOP = ("```python\ndef chop_tree(api):\n    if not api.go_to('tree', 20):\n        return False\n"
             "    return api.do()\n```")
GOOD_SAPLING = ("```python\ndef grab_sapling(api):\n    if api.in_front() != 'grass':\n        return False\n"
                "    return api.do()\n```")


def scripted(request: dict) -> str:
    """One fake LLM for all three roles, told apart by the system prompt they send."""
    messages = request["messages"]
    system, last = messages[0]["content"], str(messages[-1]["content"])
    if system.startswith("You are the slow agent"):
        return json.dumps(PLAN_2 if "Your previous plan" in last else PLAN_1)
    if system.startswith("You are the critic"):
        return json.dumps(FEEDBACK)
    if "`grab_sapling`" in str(messages):
        return GOOD_SAPLING
    return GOOD_CHOP if last.startswith("Your code failed") else BAD_CHOP  # the retry, prompts.code_writer.RETRY_PROMPT


def run_dir(root: Path) -> Path:
    (d,) = [p for p in root.iterdir() if p.is_dir() and p.name != "skills"]  # skills: the skill library
    return d


def history(d: Path) -> list[dict]:
    return torch.load(d / "checkpoint.pt", weights_only=False)["extra"]["history"]


@pytest.fixture(scope="module")
def e2e(tmp_path_factory, monkeypatch_module):  # module-scoped: runs once
    """One scripted two-iteration run, shared by the tests that read what it left behind."""
    root = tmp_path_factory.mktemp("e2e")
    monkeypatch_module.setenv("OPENAI_API_KEY", KEY)
    out = io.StringIO()
    with FakeLLMServer(scripted) as srv, contextlib.redirect_stdout(out):
        rc = train.main(TINY + ["--llm", "http", "--llm-url", srv.url, "--llm-model", "fake", "--iterations", "2",
                                "--total-steps", "600", "--runs-dir", str(root), "--capture-video"])
        requests = [r.json for r in srv.requests]
    assert rc == 0
    return run_dir(root), requests, out.getvalue()


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_e2e_two_iterations_over_http(e2e):
    d, requests, out = e2e
    plan_requests = [r for r in requests if r["messages"][0]["content"].startswith("You are the slow agent")]
    assert len(plan_requests) == 2
    assert "CRITIC-SAYS" in json.dumps(plan_requests[1]["messages"])  # the slow loop closes
    assert "CRITIC-SAYS" not in json.dumps(plan_requests[0]["messages"])
    code_requests = [json.dumps(r["messages"]) for r in requests if "`chop_tree`" in json.dumps(r["messages"])]
    assert len(code_requests) == 2 and "line 3" in code_requests[1] and "return 1 / x" in code_requests[1]
    rows = history(d)
    assert [r["n_actions"] for r in rows] == [18, 19]  # extend() between iterations
    assert rows[-1]["env_steps"] >= 600
    for path in ["config.json", "llm_transcript.jsonl", "iter_1/plan.json", "iter_1/skills/chop_tree.py",
                 "iter_1/feedback.json", "iter_1/stats.json", "iter_2/plan.json",
                 "iter_2/skills/grab_sapling.py", "iter_1/eval.gif", "stats.jsonl", "metrics.jsonl",
                 "checkpoint.pt", "summary.md", "success.png"]:
        assert (d / path).is_file(), path
    assert list(d.glob("events.out.tfevents.*"))
    env = train.env.make_env("collect_wood")  # the network as built for the task: what a resume must match
    assert json.loads((d / "config.json").read_text())["policy"] == train.identity(
        train.Agent(env.observation_space, env.action_space.n))
    transcript = (d / "llm_transcript.jsonl").read_text().splitlines()
    assert len(transcript) == len(requests) == 6
    attempts = [json.loads(x) for x in (d / "iter_1/attempts/attempts.jsonl").read_text().splitlines()]
    assert [(a["subaction"], a["attempt"], a["accepted"], a["line"]) for a in attempts] == [
        ("chop_tree", 1, False, 3), ("chop_tree", 2, True, None)]
    assert (d / "iter_1/attempts/chop_tree_1.py").read_text() == BAD_CHOP.split("\n", 1)[1].rsplit("```")[0]
    assert "[iter 1] chop_tree attempt 1 failed: line 3: ZeroDivisionError" in out  # the user sees why
    assert "[iter 1] plan:" in out and "[iter 2] plan:" in out
    stats = json.loads((d / "iter_1/stats.json").read_text())
    assert stats["code_actions"]["chop_tree"]["chosen"] > 0
    for f in d.rglob("*"):
        if f.is_file():
            assert KEY.encode() not in f.read_bytes(), f


def test_replay_reproduces_plans_and_code(e2e, tmp_path):
    d, _, _ = e2e
    rc = train.main(TINY + ["--llm", f"replay:{d / 'llm_transcript.jsonl'}", "--iterations", "2",
                            "--total-steps", "600", "--runs-dir", str(tmp_path)])
    assert rc == 0
    r = run_dir(tmp_path)
    for path in ["iter_1/plan.json", "iter_2/plan.json", "iter_1/skills/chop_tree.py",
                 "iter_2/skills/grab_sapling.py"]:
        assert (r / path).read_text() == (d / path).read_text(), path


def test_a_resumed_replay_goes_on_from_the_call_its_checkpoint_reached(e2e, tmp_path, monkeypatch):
    """Interrupted as its critic is asked (3 calls made: a plan, two tries at chop_tree), a replay resumes at the
    4th record, the critique; it started again at the 1st, and the plan's reply went to the critic."""
    d, _, _ = e2e
    critique = train.SlowAgent.critique

    def interrupted(self, *args, **kwargs):
        monkeypatch.setattr(train.SlowAgent, "critique", critique)  # once
        raise KeyboardInterrupt

    monkeypatch.setattr(train.SlowAgent, "critique", interrupted)
    argv = TINY + ["--llm", f"replay:{d / 'llm_transcript.jsonl'}", "--iterations", "2", "--total-steps", "600",
                   "--runs-dir", str(tmp_path), "--run-name", "r"]
    assert train.main(argv) == 130
    assert torch.load(tmp_path / "r" / "checkpoint.pt", weights_only=False)["extra"]["llm_calls"] == 3
    assert train.main(["--resume", str(tmp_path / "r")]) == 0
    for path in ["iter_1/feedback.json", "iter_2/plan.json", "iter_2/skills/grab_sapling.py"]:
        assert (tmp_path / "r" / path).read_text() == (d / path).read_text(), path


@pytest.mark.parametrize("mode", ["rl", "rl+config", "code", "rlgpt"])
def test_smoke_modes_on_the_reference_backend(mode, tmp_path, capsys):
    rc = train.main(TINY + ["--mode", mode, "--llm", "reference", "--iterations", "1", "--total-steps", "300",
                            "--runs-dir", str(tmp_path)])
    assert rc == 0
    d = run_dir(tmp_path)
    rows = history(d)
    assert rows[-1]["env_steps"] >= 300 and (d / "summary.md").is_file()
    assert sum(r["length"] for r in episode_rows(d)) == rows[-1]["env_steps"]
    skills_written = {p.name for p in d.glob("iter_1/skills/*.py")}
    if mode in ("rl", "rlgpt"):
        assert rows[-1]["rl_config"] == ({} if mode == "rl" else json.loads((d / "iter_1/plan.json").read_text())
                                         ["rl_config"])
    if mode == "rl":
        assert rows[-1]["n_actions"] == 17 and not skills_written
    elif mode == "rl+config":  # the plan's mask and shaping, and no code action
        plan = json.loads((d / "iter_1/plan.json").read_text())
        assert any(s["how"] == "code" for s in plan["subactions"])  # the plan had some: none was written
        assert rows[-1]["n_actions"] == 17 and not skills_written and rows[-1]["code_actions"] == []
        assert rows[-1]["rl_config"] == plan["rl_config"] and "sleep" in plan["rl_config"]["mask_actions"]
    elif mode == "code":
        assert skills_written == {"solve_task.py"} and rows[-1]["n_actions"] == 18
        assert "[iter 1] plan: 1 sub-action; code actions in use: solve_task" in capsys.readouterr().out
    else:
        assert "chop_tree.py" in skills_written and rows[-1]["n_actions"] > 17
        assert "[iter 1] plan: 3 sub-actions; code actions in use: chop_tree" in capsys.readouterr().out
    assert not (d / "llm_transcript.jsonl").exists()


def test_resume_after_sigkill_finishes_the_budget(tmp_path):
    args = [sys.executable, "train.py", *TINY, "--llm", "reference", "--iterations", "2", "--total-steps", "1200",
            "--runs-dir", str(tmp_path), "--run-name", "r"]
    proc = subprocess.Popen(args, cwd=Path(train.__file__).parent, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    ckpt, deadline = tmp_path / "r" / "checkpoint.pt", time.time() + 240
    try:
        while time.time() < deadline:  # kill after a training checkpoint AND an update logged after it
            if ckpt.is_file() and (saved := torch.load(ckpt, weights_only=False)["ppo"]["global_step"]) > 0:
                lines = (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()
                after = [x for x in lines if json.loads(x)["global_step"] > saved and "losses/policy_loss" in x]
                if after:
                    break
            assert proc.poll() is None, "the run ended before it could be killed"
            time.sleep(0.5)
        else:
            pytest.fail("no training checkpoint within 240 s")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    killed_at = torch.load(ckpt, weights_only=False)["ppo"]["global_step"]
    assert 0 < killed_at < 1200
    assert train.main(["--resume", str(tmp_path / "r")]) == 0
    final = torch.load(ckpt, weights_only=False)
    assert 1200 <= final["ppo"]["global_step"] < 1200 + 2 * 24  # at most one vector step past the budget
    assert [r["iteration"] for r in final["extra"]["history"]] == [1, 2]
    lines = (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()
    assert not set(after) & set(lines)  # what was logged after the checkpoint was rewound, not kept twice
    steps = [json.loads(x)["global_step"] for x in lines if "losses/policy_loss" in x]
    assert steps == sorted(set(steps))
    # every step is in one episode row: finished ones, those cut by the kill (unfinished.jsonl), those
    # still going at the end (unfinished.jsonl too)
    assert sum(r["length"] for r in episode_rows(tmp_path / "r")) == final["ppo"]["global_step"]


def episode_rows(d: Path) -> list[dict]:
    return [json.loads(line) for name in ("stats.jsonl", "unfinished.jsonl") if (d / name).is_file()
            for line in (d / name).read_text().splitlines()]


RL_RUN = TINY + ["--mode", "rl", "--iterations", "1", "--total-steps", "1100"]


@pytest.fixture(scope="module")
def seed_runs(tmp_path_factory):
    """Plain PPO, 1100 env steps: seed 1 checkpointing every 1000 steps (splitting a rollout of 2 x 32
    decisions), seed 1 never checkpointing, seed 2."""
    root = tmp_path_factory.mktemp("seeds")
    for name, extra in [("s1_ckpt", ["--seed", "1", "--checkpoint-every", "1000"]),
                        ("s1_none", ["--seed", "1", "--checkpoint-every", str(10**9)]),
                        ("s2", ["--seed", "2", "--checkpoint-every", "1000"])]:
        assert train.main(RL_RUN + extra + ["--runs-dir", str(root), "--run-name", name]) == 0
    return root


def test_checkpoints_do_not_change_learning(seed_runs):
    def losses(name):
        rows = [json.loads(x) for x in (seed_runs / name / "metrics.jsonl").read_text().splitlines()]
        return [{k: v for k, v in r.items() if k.startswith("losses/") or k == "global_step"}
                for r in rows if "losses/policy_loss" in r]
    with_ckpt = losses("s1_ckpt")
    assert len(with_ckpt) >= 8 and not any(r["global_step"] == 1000 for r in with_ckpt)  # 1000 is mid-rollout
    assert with_ckpt == losses("s1_none")


def test_every_env_step_is_in_one_crafter_row(seed_runs):
    for name in ("s1_ckpt", "s1_none", "s2"):
        d = seed_runs / name
        final_step = torch.load(d / "checkpoint.pt", weights_only=False)["ppo"]["global_step"]
        unfinished = (d / "unfinished.jsonl").read_text().splitlines()
        assert 1 <= len(unfinished) <= 2  # the 2 envs' episodes still going at the end (if any step was taken)
        rows = episode_rows(d)
        assert sum(r["length"] for r in rows) == final_step
        assert all(r["length"] > 0 and r["iteration"] == 1 and {"reward", "seed", "achievement_collect_wood"} <= set(r)
                   for r in rows)


def test_runs_of_other_seeds_and_evaluation_play_other_worlds(seed_runs):
    train_seeds = {name: [r["seed"] for r in episode_rows(seed_runs / name)] for name in ("s1_ckpt", "s2")}
    eval_seeds = [json.loads(x)["seed"] for name in ("s1_ckpt", "s2")
                  for x in (seed_runs / name / "eval.jsonl").read_text().splitlines()]
    assert len(train_seeds["s1_ckpt"]) >= 5 and len(eval_seeds) == 2
    for seeds in train_seeds.values():
        assert len(set(seeds)) == len(seeds)  # no env replays a world, no two envs share one
    assert not set(train_seeds["s1_ckpt"]) & set(train_seeds["s2"])
    assert not set(eval_seeds) & (set(train_seeds["s1_ckpt"]) | set(train_seeds["s2"]))
    assert train.main(["--resume", str(seed_runs / "s2")]) == 0  # a finished run: nothing more to do
    assert [r["seed"] for r in episode_rows(seed_runs / "s2")] == train_seeds["s2"]


@pytest.mark.parametrize("mode", ["rlgpt", "code"])
def test_a_refusal_is_free_where_rl_chooses_and_charged_under_mode_code(mode, tmp_path):
    """The training envs of an RL mode make a call that returns at once free (PPO reads the mask, so it decides
    again); --mode code's program is called on every decision whatever the mask says, so there it costs a noop,
    else a program that refuses would never move time on."""
    args = train.Args(task="collect_wood", num_envs=2, mode=cli.Mode(mode))
    run = Run(args, tmp_path)
    action_set = ActionSet()
    action_set.add("refuse", CodeAction("refuse", "def refuse(api):\n    return False\n"))
    run.envs = make_train_envs(args, run, PPOConfig(), action_set)
    run.envs.reset(seed=0)
    _, _, _, _, infos = run.envs.step([17, 17])
    assert list(infos["prim_steps"]) == ([0, 0] if mode == "rlgpt" else [1, 1])
    assert ("action_mask" in infos) == (mode == "rlgpt")
    run.envs.close()


def test_a_rewritten_code_action_starts_from_its_old_logit_row(tmp_path):
    action_set = ActionSet()
    v1 = action_set.add("chop_tree", CHOP_TREE)
    args = train.Args(task="collect_wood", num_envs=2)
    run = Run(args, tmp_path)
    cfg = PPOConfig()
    run.envs = make_train_envs(args, run, cfg, ActionSet())
    agent = Agent(run.envs.single_observation_space, 17)
    ppo = PPO(agent, cfg)
    grow_actions(ppo, run.envs, action_set, 17, action_set.mask(ACTIONS, []))
    with torch.no_grad():
        agent.actor[-1].weight[17].normal_()  # what PPO learned about calling v1
    v2 = action_set.add("chop_tree", CodeAction("chop_tree", CHOP_TREE.source.replace("30", "20")))
    assert (v1.name, v2.name, v2.replaces) == ("chop_tree", "chop_tree_v2", "chop_tree")
    grow_actions(ppo, run.envs, action_set, 17, action_set.mask(ACTIONS, []))
    head = agent.actor[-1]
    assert agent.n_actions == 19 and run.envs.single_action_space.n == 19
    assert torch.equal(head.weight[18], head.weight[17]) and head.bias[18] == head.bias[17]
    assert not torch.equal(head.weight[17], torch.zeros(head.in_features))
    run.envs.close()


def test_bad_input_exits_2_with_a_sentence(tmp_path, capsys):
    for argv, words in [(["--task", "colect_wood"], "collect_wood"), (["--mode", "magic"], "--mode"),
                        (["--num-envs", "0"], "positive"), (["--task", "minedojo:harvest_milk"], "MineDojo"),
                        (["--precision", "fp16"], "--precision"), (["--crafter-impl", "slow"], "--crafter-impl"),
                        # PPO's settings: each once in a range it may not take (it failed mid-run before)
                        (["--learning-rate", "-1"], "--learning-rate must be positive, not -1.0"),
                        (["--update-epochs", "0"], "--update-epochs must be positive"),
                        (["--gamma", "1.5"], "--gamma must be in (0, 1]"), (["--gae-lambda", "-0.1"], "in [0, 1]"),
                        (["--ent-coef", "-0.01"], "--ent-coef must be 0 or more"),
                        (["--target-kl", "0"], "--target-kl must be positive"),
                        (["--new-action-prior", "1"], "--new-action-prior must be a probability in (0, 1)"),
                        (["--eval-episodes", "-1"], "--eval-episodes must be 0 (no evaluation) or more")]:
        with pytest.raises(SystemExit) as e:
            train.main(argv + ["--runs-dir", str(tmp_path)])
        assert e.value.code == 2
        assert words in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # stopped before anything was written
    rc = train.main(["--llm", "http", "--llm-url", "http://127.0.0.1:9/v1", "--runs-dir", str(tmp_path)])
    assert rc == 2
    assert "127.0.0.1:9" in capsys.readouterr().err


@pytest.mark.parametrize("url", ["127.0.0.1:8000/v1", "htpp://127.0.0.1:8000/v1"])
def test_a_bad_llm_url_is_a_sentence_and_leaves_no_run_directory(url, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        train.main(["--llm", "http", "--llm-url", url, "--runs-dir", str(tmp_path)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert repr(url) in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []
    assert train.main(["--llm", "http", "--llm-url", "http://127.0.0.1:9/v1", "--runs-dir", str(tmp_path)]) == 2
    assert list(tmp_path.iterdir()) == []  # nothing listens there: the run never started


def saved_run(tmp_path: Path, **args) -> Path:
    d = tmp_path / "r"
    d.mkdir()
    a, cfg, _ = train.parse_args(["--run-name", "r"])
    (d / "config.json").write_text(json.dumps({"args": dict(dataclasses.asdict(a), **args),
                                               "ppo": dataclasses.asdict(cfg)}))
    return d


def test_resume_takes_new_endpoint_and_budget_and_names_the_flags_it_cannot_change(tmp_path, capsys):
    d = saved_run(tmp_path, llm="http", llm_url="http://old:1/v1", iterations=2, total_steps=600, num_envs=2)
    argv = ["--resume", str(d), "--llm-url", "http://new:2/v1", "--llm-model", "m2", "--total-steps", "900",
            "--iterations", "3", "--num-envs", "2"]  # --num-envs repeats the saved value: allowed
    args, _, parser = train.parse_args(argv)
    args, cfg = cli.resumed_args(args, train.PPOConfig(), argv, parser)
    assert (args.llm_url, args.llm_model, args.total_steps, args.iterations) == ("http://new:2/v1", "m2", 900, 3)
    assert (args.llm, args.num_envs, args.resume, args.run_name) == ("http", 2, str(d), "r")  # the rest: saved
    assert "--llm-url http://new:2/v1 (was http://old:1/v1)" in capsys.readouterr().out
    for bad, words in [(["--seed", "7"], "--seed (the run has 1, not 7)"), (["--learning-rate", "0.1"],
                       "--learning-rate"), (["--task", "place_table"], "--task"), (["--num-envs", "4"], "--num-envs"),
                       (["--total-steps", "300"], "--total-steps may only grow")]:
        argv = ["--resume", str(d), *bad]
        args, cfg, parser = train.parse_args(argv)
        with pytest.raises(SystemExit) as e:
            cli.resumed_args(args, cfg, argv, parser)
        assert e.value.code == 2 and words in capsys.readouterr().err, bad


def test_resume_refuses_an_old_config_and_a_bigger_budget_for_a_finished_run(tmp_path, capsys):
    d = saved_run(tmp_path, iterations=2, total_steps=600)
    (d / "summary.md").write_text("# done\n")  # the run finished its 2 iterations
    for bad, words in [(["--total-steps", "900"], "needs a larger --iterations too"),
                       (["--total-steps", "900", "--iterations", "2"], "needs a larger --iterations too")]:
        argv = ["--resume", str(d), *bad]
        args, cfg, parser = train.parse_args(argv)
        with pytest.raises(SystemExit) as e:
            cli.resumed_args(args, cfg, argv, parser)
        assert e.value.code == 2 and words in capsys.readouterr().err, bad
    argv = ["--resume", str(d), "--total-steps", "900", "--iterations", "3"]  # new steps, new iteration: fine
    args, cfg, parser = train.parse_args(argv)
    assert cli.resumed_args(args, cfg, argv, parser)[0].total_steps == 900
    saved = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**saved, "args": {**saved["args"], "llm": "library"}}))
    args, cfg = cli.resumed_args(args, cfg, argv, parser)  # a run made when the reference backend was spelt "library"
    cli.validate(args, cfg, parser)
    assert args.llm == "reference"
    before_floor = {k: v for k, v in saved["ppo"].items() if k != "teacher_min"}  # its teacher fell to 0
    (d / "config.json").write_text(json.dumps({**saved, "ppo": before_floor}))
    assert cli.resumed_args(args, cfg, argv, parser)[1].teacher_min == 0.0 < train.PPOConfig().teacher_min
    saved["ppo"]["seed"] = 1  # a config.json of an older train.py (PPOConfig had a seed then)
    (d / "config.json").write_text(json.dumps(saved))
    args, cfg, parser = train.parse_args(["--resume", str(d)])
    with pytest.raises(SystemExit) as e:
        cli.resumed_args(args, cfg, ["--resume", str(d)], parser)
    assert e.value.code == 2 and "does not know (seed)" in capsys.readouterr().err


def test_resume_of_a_run_trained_with_another_network_stops_with_a_sentence(tmp_path, capsys):
    d = saved_run(tmp_path, mode="rl", total_steps=600)
    saved = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**saved, "policy": "policy.Agent 000000000000"}))
    with pytest.raises(SystemExit) as e:
        train.main(["--resume", str(d)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "that run trained the network policy.Agent 000000000000, but this code builds " \
        "policy.Agent " in err and "(policy.py changed)" in err


def test_resume_with_a_new_endpoint_and_a_larger_budget_runs_on(e2e, tmp_path):
    d = tmp_path / "copy"
    shutil.copytree(e2e[0], d)
    with FakeLLMServer(scripted) as srv:
        rc = train.main(["--resume", str(d), "--llm-url", srv.url, "--iterations", "3", "--total-steps", "900"])
    assert rc == 0 and srv.requests  # the new endpoint planned iteration 3
    rows = history(d)
    assert [r["iteration"] for r in rows] == [1, 2, 3] and rows[-1]["env_steps"] >= 900
    assert (d / "iter_3/plan.json").is_file()
    saved = json.loads((d / "config.json").read_text())["args"]
    assert (saved["llm_url"], saved["total_steps"]) == (srv.url, 900)  # the next --resume keeps them


def noisy():
    """An endpoint that fails in every way a user can be told about, and still lets the run go on."""
    count = [0, 0]

    def reply(request: dict):
        count[0] += 1
        if count[0] == 1:
            return server_error(503)
        if (request.get("response_format") or {}).get("type") == "json_schema":
            return Fault(status=400, text="response_format json_schema is not supported")
        if request["messages"][0]["content"].startswith("You are the slow agent"):
            count[1] += 1
            if count[1] == 1:
                return "Sorry, no plan today."
            return json.dumps(PLAN_1)[:-1] + ",  // my plan\n}"  # sloppy JSON, repaired
        return "I cannot write that."

    return reply


def test_a_noisy_endpoint_leaves_a_line_for_each_thing_that_went_wrong(tmp_path, capsys):
    with FakeLLMServer(noisy()) as srv:
        rc = train.main(TINY + ["--llm", "http", "--llm-url", srv.url, "--iterations", "1", "--total-steps", "100",
                                "--runs-dir", str(tmp_path)])
    assert rc == 0
    out = capsys.readouterr()
    log = out.out + out.err
    assert f"HTTP 503 from {srv.url}" in log and "retry 1/5" in log
    assert "refused response_format json_schema (HTTP 400)" in log
    assert "[iter 1] plan reply 1 rejected: the reply is not valid JSON: there is no JSON" in log
    assert "Reply with" not in log and "Your reply" not in log  # what was said to the model stays there
    assert log.count("chop_tree attempt") == 4 and "no working code for 'chop_tree': it is left to RL" in log
    rows = (run_dir(tmp_path) / "iter_1/attempts/attempts.jsonl").read_text().splitlines()
    assert len(rows) == 4 and all(json.loads(r)["error"] for r in rows)


def test_a_resume_inside_an_iteration_keeps_what_the_iteration_had_counted(tmp_path, monkeypatch):
    """Stopped right after a checkpoint in the middle of an iteration and resumed: the iteration's train
    success still counts every training episode that finished in it, before the stop and after."""
    real_save, stops = train.save, []

    def save_then_stop(run, ppo, action_set, state):
        real_save(run, ppo, action_set, state)
        if state.progress is not None and not stops:  # the first checkpoint inside the iteration
            stops.append(ppo.global_step)
            raise KeyboardInterrupt

    monkeypatch.setattr(train, "save", save_then_stop)
    assert train.main(RL_RUN + ["--runs-dir", str(tmp_path)]) == 130 and stops
    d = run_dir(tmp_path)
    assert train.main(["--resume", str(d)]) == 0
    finished = [json.loads(line) for line in (d / "stats.jsonl").read_text().splitlines()]
    (row,) = history(d)
    assert row["train_episodes"] == len(finished) > 0
    assert row["train_success"] == round(sum(r["achievement_collect_wood"] > 0 for r in finished) / len(finished), 3)

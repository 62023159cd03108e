"""Tests for ppo.py, the mechanics of one update: GAE and semi-MDP returns, rollout bookkeeping, the ratio and KL,
masks, the optimizer across extend(), checkpoints, the LR schedule, host/device transfers (what PPO learns:
tests/test_ppo_learning.py; policy.py's network alone: tests/test_policy.py).

Run: python -m pytest -q tests/test_ppo.py
"""

import gymnasium as gym
import numpy as np
import pytest
import torch

import distributed
import env
import ppo as ppo_mod
from core import PrimitiveAPI
from policy import Agent
from ppo import PPO, PPOConfig, compute_gae, seed_everything
from run_dir import load_checkpoint, save_checkpoint
from tests.ppo_helpers import MACRO, SAME_STEP, GatedToyEnv, ToyEnv


def toy_envs(num_envs: int = 2, n_actions: int = 5) -> gym.vector.SyncVectorEnv:
    return gym.vector.SyncVectorEnv([lambda: ToyEnv(n_actions) for _ in range(num_envs)],
                                    autoreset_mode=SAME_STEP)


def test_gae_hand_computed():
    # one env, gamma 0.9, lambda 0.8: step 0 normal, step 1 a 3-step macro action,
    # step 2 truncated (bootstraps from V(final_obs) = 3.0), step 3 terminal.
    g, lam = 0.9, 0.8
    rewards = torch.tensor([[1.0], [2.0], [0.5], [1.0]])
    values = torch.tensor([[0.5], [1.0], [2.0], [0.7]])
    next_values = torch.tensor([[1.0], [2.0], [3.0], [9.0]])
    terminated = torch.tensor([[0.0], [0.0], [0.0], [1.0]])
    dones = torch.tensor([[0.0], [0.0], [1.0], [1.0]])
    prim_steps = torch.tensor([[1.0], [3.0], [1.0], [1.0]])
    adv, ret = compute_gae(rewards, values, next_values, terminated, dones, prim_steps, g, lam)
    a3 = 1.0 - 0.7  # terminal: no bootstrap
    a2 = 0.5 + 0.9 * 3.0 - 2.0  # truncated: bootstrap from V(final_obs), trace cut
    a1 = (2.0 + 0.729 * 2.0 - 1.0) + 0.729 * 0.512 * a2  # gamma^3 bootstrap, (gamma lambda)^3 trace: macro step
    a0 = (1.0 + 0.9 * 1.0 - 0.5) + 0.9 * 0.8 * a1
    torch.testing.assert_close(adv[:, 0], torch.tensor([a0, a1, a2, a3]))
    torch.testing.assert_close(ret, adv + values)


def test_rollout_feeds_gae_semi_mdp_discounts_and_truncation_bootstrap(monkeypatch):
    seed_everything(0)
    envs = toy_envs(num_envs=2)
    agent = Agent(envs.single_observation_space, 5)
    cfg = PPOConfig(num_steps=6, num_minibatches=2, update_epochs=1, gamma=0.9)
    ppo = PPO(agent, cfg)
    seen = {}

    def spy(rewards, values, next_values, terminated, dones, prim_steps, gamma, lam):
        if seen:  # keep the first (full) rollout only
            return compute_gae(rewards, values, next_values, terminated, dones, prim_steps, gamma, lam)
        seen.update(rewards=rewards.clone(), next_values=next_values.clone(), terminated=terminated.clone(),
                    dones=dones.clone(), prim_steps=prim_steps.clone(), gamma=gamma, values=values.clone())
        seen["final_v"] = agent.get_value(torch.tensor([[1.0, 1.0, 0.5]]))  # truncated episode's last obs
        return compute_gae(rewards, values, next_values, terminated, dones, prim_steps, gamma, lam)

    monkeypatch.setattr(ppo_mod, "compute_gae", spy)
    actions = []
    ppo.train(envs, 6 * 2 * 3, on_step=lambda a, infos: actions.append(a.copy()))  # >= one full rollout
    actions = np.stack(actions)  # (T, N)
    steps_all = np.where(actions == MACRO, 3, 1)
    assert ppo.global_step == steps_all.sum()  # the budget counts primitive steps
    assert 36 <= ppo.global_step < 36 + 2 * 3  # stops within one vector step of the budget
    steps = steps_all[:6]
    torch.testing.assert_close(seen["prim_steps"], torch.tensor(steps, dtype=torch.float32))  # ToyEnv's macro: 3 steps
    assert seen["gamma"] == 0.9
    # episode 0 (steps 0-2) terminates, episode 1 (steps 3-5) is truncated
    torch.testing.assert_close(seen["terminated"][:, 0], torch.tensor([0, 0, 1, 0, 0, 0.0]))
    torch.testing.assert_close(seen["dones"][:, 0], torch.tensor([0, 0, 1, 0, 0, 1.0]))
    torch.testing.assert_close(seen["next_values"][5], seen["final_v"].expand(2))
    torch.testing.assert_close(seen["next_values"][:2], seen["values"][1:3])  # mid-episode: V(s_{t+1})


class ScriptedAPI(PrimitiveAPI):
    def wait(self, times: int) -> None:
        """Take `times` primitive steps."""
        for _ in range(times):
            self._act(0)


class ScriptedEnv(gym.Env):
    """Known rewards: primitive step j of an episode (j = 0, 1, ...) pays 1 + j; episodes terminate after
    EP_LEN primitive steps. Code actions (through env.CodeActionWrapper) run against ScriptedAPI."""

    EP_LEN = 10

    def __init__(self):
        self.observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(1)  # one primitive action; CodeActionWrapper adds action 1

    def _obs(self):
        return np.array([self.j / self.EP_LEN, 1.0], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.j = 0
        return self._obs(), {}

    def step(self, action):
        reward, self.j = 1.0 + self.j, self.j + 1
        done = self.j >= self.EP_LEN
        info = {"prim_steps": 1, "episode": {"r": 0.0, "l": self.j}} if done else {"prim_steps": 1}
        return self._obs(), reward, done, False, info

    def make_api(self, budget: int, gamma: float = 1.0) -> ScriptedAPI:
        return ScriptedAPI(self, budget, gamma)


def test_semi_mdp_returns_and_advantages_match_a_hand_computation(monkeypatch):
    """Primitive steps and a 3-step code action mixed: PPO must see R = sum_i gamma^i r_i for the macro
    step and bootstrap with gamma^prim_steps. With lambda 1 and a critic that says V = c everywhere, the return PPO
    computes for a decision is then the return discounted once per primitive step, whatever the mix of
    decisions it falls into: a closed form of the env's rewards. (The (gamma lambda)^prim_steps trace for lambda < 1
    is checked on hand-computed numbers in test_gae_hand_computed.)"""
    g, c, T = 0.9, 0.25, 12
    wait3 = env.CodeAction("wait3", "def wait3(api):\n    api.wait(3)\n    return True\n")
    envs = gym.vector.SyncVectorEnv([lambda: env.CodeActionWrapper(ScriptedEnv(), [wait3], gamma=g) for _ in range(2)],
                                    autoreset_mode=SAME_STEP)
    seed_everything(6)
    agent = Agent(envs.single_observation_space, 2)
    with torch.no_grad():
        agent.critic[-1].weight.zero_()
        agent.critic[-1].bias.fill_(c)
    seen = []

    def spy(*args):
        out = compute_gae(*args)
        seen.append([a.clone() if torch.is_tensor(a) else a for a in args] + [t.clone() for t in out])
        return out

    monkeypatch.setattr(ppo_mod, "compute_gae", spy)
    taken = []
    ppo = PPO(agent, PPOConfig(num_steps=T, gamma=g, gae_lambda=1.0, update_epochs=1))
    ppo.train(envs, 3 * 2 * T, on_step=lambda a, infos: taken.append(a.copy()))  # the first rollout is full
    rewards, values, next_values, terminated, dones, prim_steps, gamma, gl, adv, ret = seen[0]
    taken = np.stack(taken)[:T]
    assert (taken == 0).any() and (taken == 1).any(), "the test needs primitive and macro steps mixed"
    assert (gamma, gl) == (g, 1.0) and (values == c).all()

    def ahead(j: int, end: int) -> float:
        """Rewards 1 + i of primitive steps i = j .. end - 1, discounted by gamma per primitive step."""
        return sum(g ** (i - j) * (1.0 + i) for i in range(j, end))

    for n in range(2):
        j, starts, expect_r, expect_steps, expect_done = 0, [], [], [], []
        for a in taken[:, n]:  # replay the episode by hand: rewards 1 + j, episodes of EP_LEN steps
            steps = min(3 if a == 1 else 1, ScriptedEnv.EP_LEN - j)
            starts.append(j)
            expect_r.append(sum(g ** i * (1.0 + j + i) for i in range(steps)))
            expect_steps.append(steps)
            j += steps
            expect_done.append(j >= ScriptedEnv.EP_LEN)
            j = 0 if expect_done[-1] else j
        torch.testing.assert_close(rewards[:, n], torch.tensor(expect_r))
        torch.testing.assert_close(prim_steps[:, n], torch.tensor(expect_steps, dtype=torch.float32))
        torch.testing.assert_close(dones[:, n], torch.tensor(expect_done, dtype=torch.float32))
        last_done = max(t for t in range(T) if expect_done[t]) if any(expect_done) else -1
        for t in range(T):  # to the episode's end, or to the rollout's end and V = c there
            i = starts[t]
            want = ahead(i, ScriptedEnv.EP_LEN) if t <= last_done else ahead(i, j) + g ** (j - i) * c
            torch.testing.assert_close(ret[t, n], torch.tensor(want), msg=f"decision {t} of env {n}")
        torch.testing.assert_close(adv[:, n], ret[:, n] - c)


def test_first_minibatch_has_ratio_one_and_zero_kl():
    seed_everything(1)
    envs = toy_envs(num_envs=4)
    agent = Agent(envs.single_observation_space, 5)
    mask = np.array([[True, True, False, True, False]] * 2 + [[False, True, True, True, True]] * 2)
    logs = []
    ppo = PPO(agent, PPOConfig(num_steps=16, num_minibatches=1, update_epochs=1))
    ppo.train(envs, 1, action_mask=mask, on_log=lambda m, step: logs.append(m))
    # with one minibatch and one epoch, the logged kl is the first minibatch's: the policy has not moved yet
    assert abs(logs[0]["losses/approx_kl"]) < 1e-6
    assert abs(logs[0]["losses/old_approx_kl"]) < 1e-6
    assert logs[0]["losses/clipfrac"] == 0.0


def test_average_gradients_leaves_out_parameters_without_a_gradient(tmp_path):
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        agent = Agent(gym.spaces.Box(-1, 1, (3,), np.float32), 4)
        agent.get_value(torch.rand(5, 3)).sum().backward()  # the critic alone: the actor gets no gradient
        distributed.average_gradients(agent.parameters())  # (moved from PPO._average_gradients to distributed.py)
        assert all(p.grad is None for p in agent.actor.parameters())  # zeros would move Adam's moments
        assert all(p.grad is not None for p in agent.critic.parameters())
    finally:
        torch.distributed.destroy_process_group()


def test_rollout_moves_data_between_host_and_device_once_per_vector_step(monkeypatch):
    """The CUDA path's waits, counted on the CPU: per vector step one device -> host copy (the actions
    env.step needs) and one host -> device copy per observation array (the next forward pass needs it);
    rewards, step counts and done flags go over once per rollout."""
    envs = toy_envs(num_envs=2)
    ppo = PPO(Agent(envs.single_observation_space, 5), PPOConfig(num_steps=16, update_epochs=1))
    counts, in_step = {"to_host": 0, "to_device": 0, "steps": 0}, [False]
    real = {name: getattr(torch.Tensor, name) for name in ("cpu", "item", "tolist", "numpy", "to")}
    real_as_tensor, real_tensor = torch.as_tensor, torch.tensor

    def counting(name, kind):
        def f(self, *a, **k):
            if in_step[0]:
                counts[kind] += 1
            return real[name](self, *a, **k)
        return f

    for name in ("cpu", "item", "tolist"):
        monkeypatch.setattr(torch.Tensor, name, counting(name, "to_host"))
    monkeypatch.setattr(torch.Tensor, "to", counting("to", "to_device"))

    def as_tensor(*a, **k):
        counts["to_device"] += in_step[0]
        return real_as_tensor(*a, **k)

    def tensor(*a, **k):
        counts["to_device"] += in_step[0]
        return real_tensor(*a, **k)

    monkeypatch.setattr(torch, "as_tensor", as_tensor)
    monkeypatch.setattr(torch, "tensor", tensor)
    step = envs.step

    def counted_step(actions):
        counts["steps"] += 1
        return step(actions)

    monkeypatch.setattr(envs, "step", counted_step)
    ppo.train(envs, 1, progress=lambda n: None)  # resets the env: not part of the count
    monkeypatch.setattr(ppo, "_update", lambda *a: {})  # the update's own transfers are not counted either
    in_step[0] = True
    ppo.train(envs, 16 * 2)
    in_step[0] = False
    n = counts["steps"] - 1  # vector steps of the second call (toy macro actions spend the budget early)
    assert n >= 8
    # sample()'s uniforms + the observation per step, the actions back per step; + a few per rollout
    assert counts["to_device"] <= 2 * n + 8 and counts["to_host"] <= n + 2, counts


def test_extend_keeps_the_optimizer_working():
    seed_everything(3)
    envs = toy_envs(n_actions=5)
    agent = Agent(envs.single_observation_space, 5)
    ppo = PPO(agent, PPOConfig(num_steps=8, num_minibatches=2, update_epochs=2))
    ppo.train(envs, 16)
    head = agent.actor[-1]
    moments = {n: ppo.optimizer.state[head.weight][n].clone() for n in ("exp_avg", "exp_avg_sq")}
    agent.extend(2, obs=ppo.next_obs)
    ppo._sync_optimizer()
    for name, m in moments.items():  # padding keeps the old rows' moments; new rows get a sane scale
        padded = ppo.optimizer.state[head.weight][name]
        assert padded.shape == (7, 64) and torch.equal(padded[:5], m)
    assert torch.equal(ppo.optimizer.state[head.weight]["exp_avg"][5:], torch.zeros(2, 64))
    assert ppo.optimizer.state[head.weight]["exp_avg_sq"][5:].min() > 0
    w_before = head.weight.detach().clone()
    stats = ppo.train(toy_envs(n_actions=7), 32)  # a new, bigger env: PPO resets it and keeps training
    assert stats["env_steps"] >= 32 and ppo.optimizer.state[head.weight]["exp_avg"].shape == (7, 64)
    assert not torch.equal(head.weight[5:], w_before[5:])  # the new rows learn
    assert torch.isfinite(head.weight).all()


def test_masked_actions_never_sampled_and_get_no_gradient():
    seed_everything(4)
    agent = Agent(gym.spaces.Box(-1, 1, (3,), np.float32), 6)
    with torch.no_grad():
        agent.actor[-1].bias.copy_(torch.tensor([0.0, 20.0, 0.0, 20.0, 0.0, 0.0]))  # masked ones favoured
    mask = torch.tensor([True, False, True, False, True, True]).expand(4096, 6)
    obs = torch.rand(4096, 3)
    action, logprob, entropy, _ = agent.get_action_and_value(obs, mask=mask)
    assert mask.gather(1, action[:, None]).all()
    assert torch.isfinite(logprob).all() and torch.isfinite(entropy).all()
    (logprob.sum() + entropy.sum()).backward()
    assert agent.actor[-1].bias.grad[[1, 3]].abs().max() == 0.0
    assert agent.actor[-1].bias.grad[[0, 2]].abs().max() > 0.0
    # and inside training, with a per-env mask
    envs = toy_envs(num_envs=2)
    agent = Agent(envs.single_observation_space, 5)
    env_mask = np.array([[False, True, True, True, True], [True, True, True, False, False]])
    taken = []
    PPO(agent, PPOConfig(num_steps=32, num_minibatches=2, update_epochs=1)).train(
        envs, 200, action_mask=env_mask, on_step=lambda a, infos: taken.append(a.copy()))
    taken = np.stack(taken)
    assert env_mask[np.arange(2), taken].all()


def test_state_dependent_mask_is_obeyed_and_the_update_scores_under_it():
    """Each decision obeys the mask of its own state, and the update scores it under that same mask: with one
    minibatch and one epoch the policy has not moved, so the ratio is 1 (scoring under another mask is not)."""
    seed_everything(2)
    envs = gym.vector.SyncVectorEnv([GatedToyEnv for _ in range(4)], autoreset_mode=SAME_STEP)
    agent = Agent(envs.single_observation_space, 5)
    with torch.no_grad():
        agent.actor[-1].bias.copy_(torch.tensor([0.0, 0.0, 3.0, 0.0, 0.0]))  # the gated action favoured
    logs = []
    PPO(agent, PPOConfig(num_steps=16, num_minibatches=1, update_epochs=1)).train(
        envs, 64, on_log=lambda m, step: logs.append(m))  # 64 env steps: within one rollout, one update
    counts = {k: sum(c[k] for c in envs.get_attr("counts")) for k in ("gated_taken", "not_allowed", "gate_shut")}
    assert counts["not_allowed"] == 0 and counts["gated_taken"] > 0 and counts["gate_shut"] > 0, counts
    assert abs(logs[0]["losses/approx_kl"]) < 1e-6 and logs[0]["losses/clipfrac"] == 0.0


def _run_and_record(ppo: PPO, envs, steps: int):
    logs, actions = [], []
    ppo.train(envs, steps, on_log=lambda m, s: logs.append((m["losses/policy_loss"], m["losses/value_loss"],
                                                            m["losses/approx_kl"], s)),
              on_step=lambda a, infos: actions.append(a.copy()))
    return logs, np.stack(actions)


def test_checkpoint_roundtrip_gives_identical_actions_and_losses(tmp_path):
    seed_everything(5)
    cfg = PPOConfig(num_steps=16, num_minibatches=2, update_epochs=2)
    agent = Agent(gym.spaces.Box(-1, 1, (3,), np.float32), 5)
    a = PPO(agent, cfg, total_steps=2000)
    a.train(toy_envs(n_actions=5), 64)
    agent.extend(2, obs=a.next_obs)  # the checkpoint holds a grown agent
    a.train(toy_envs(n_actions=7), 64)
    path = tmp_path / "ckpt.pt"
    save_checkpoint(str(path), a, [{"name": "chop_tree"}, {"name": "go_home"}], {"iteration": 2})
    logs_a, actions_a = _run_and_record(a, toy_envs(n_actions=7), 96)

    seed_everything(99)  # a different fresh agent with the original 5 actions
    b = PPO(Agent(gym.spaces.Box(-1, 1, (3,), np.float32), 5), cfg, total_steps=2000)
    code_actions, extra = load_checkpoint(str(path), b)
    assert b.agent.n_actions == 7 and extra == {"iteration": 2} and code_actions[1]["name"] == "go_home"
    logs_b, actions_b = _run_and_record(b, toy_envs(n_actions=7), 96)
    assert len(logs_a) >= 2
    np.testing.assert_array_equal(actions_a, actions_b)
    assert logs_a == logs_b
    assert not (tmp_path / "ckpt.pt.tmp").exists()


def test_a_checkpoint_with_twenty_code_actions_loads_into_a_fresh_agent(tmp_path):
    """A run's code actions only grow (a rewrite is a new version, the old one masked): at the default prior
    0.05, a fresh agent extended by 20 at once asked for all the probability, and --resume stopped there."""
    cfg, space = PPOConfig(num_steps=16), gym.spaces.Box(-1, 1, (3,), np.float32)
    a = PPO(Agent(space, 5), cfg, total_steps=2000)
    for _ in range(4):  # four iterations of five new code actions each
        a.agent.extend(5)
    path = tmp_path / "ckpt.pt"
    save_checkpoint(str(path), a, [{"name": f"skill_{i}"} for i in range(20)])
    b = PPO(Agent(space, 5), cfg, total_steps=2000)
    load_checkpoint(str(path), b)
    obs = torch.rand(4, 3)
    assert b.agent.n_actions == 25 and torch.equal(b.agent.logits(obs), a.agent.logits(obs))


def test_lr_anneals_linearly_over_total_steps():
    envs = toy_envs()
    ppo = PPO(Agent(envs.single_observation_space, 5), PPOConfig(num_steps=8, update_epochs=1, learning_rate=1e-3),
              total_steps=1000)
    lrs = []
    ppo.train(envs, 100, on_log=lambda m, s: lrs.append((m["charts/learning_rate"], s)))
    steps_before = [0] + [s for _, s in lrs[:-1]]  # lr is set from global_step before each rollout
    for (lr, _), s0 in zip(lrs, steps_before, strict=True):
        assert lr == pytest.approx(1e-3 * (1 - s0 / 1000))

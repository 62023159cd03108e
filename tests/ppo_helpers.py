"""Toy environments and spaces shared by tests/test_ppo.py, tests/test_ppo_learning.py and tests/test_policy.py
(a plain module: it holds no tests)."""

import gymnasium as gym
import numpy as np

SAME_STEP = gym.vector.AutoresetMode.SAME_STEP
MACRO = 1  # in ToyEnv, action 1 is a 3-step macro action


class ToyEnv(gym.Env):
    """Deterministic 3-decision episodes; even episodes terminate, odd ones are truncated.
    Action 1 reports prim_steps=3 (a macro action), action 2 pays reward 1."""

    def __init__(self, n_actions: int = 5, ep_len: int = 3):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
        self.action_space = gym.spaces.Discrete(n_actions)
        self.ep_len, self.episode = ep_len, -1

    def _obs(self):
        return np.array([self.t / self.ep_len, self.episode % 2, 0.5], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.ret, self.length = 0, 0.0, 0
        self.episode += 1
        return self._obs(), {}

    def step(self, action):
        steps = 3 if action == MACRO else 1
        self.t += 1
        self.length += steps
        reward = float(action == 2) + 0.1 * self.t
        self.ret += reward
        done = self.t >= self.ep_len
        terminated, truncated = done and self.episode % 2 == 0, done and self.episode % 2 == 1
        info = {"prim_steps": steps}
        if done:
            info["episode"] = {"r": self.ret, "l": self.length, "success": terminated}
        return self._obs(), reward, terminated, truncated, info


def dict_space() -> gym.spaces.Dict:
    return gym.spaces.Dict({"image": gym.spaces.Box(0, 255, (64, 64, 3), np.uint8),
                            "inventory": gym.spaces.Box(0, 9, (16,), np.uint8)})


class GatedToyEnv(ToyEnv):
    """ToyEnv whose action 2 may start only on even decisions of an episode (a code action's initiation
    condition, as env.CodeActionWrapper reports it: action_mask() and info["action_mask"] after reset and step).
    It counts each action by whether its state allowed it."""

    def action_mask(self):
        return np.array([True, True, self.t % 2 == 0, True, True])

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        self.counts = getattr(self, "counts", {"gated_taken": 0, "not_allowed": 0, "gate_shut": 0})
        return obs, dict(info, action_mask=self.action_mask())

    def step(self, action):
        allowed = self.action_mask()
        self.counts["not_allowed"] += not allowed[action]
        self.counts["gated_taken"] += action == 2
        self.counts["gate_shut"] += not allowed[2]
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, dict(info, action_mask=self.action_mask())

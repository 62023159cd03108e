"""Tests for policy.py, the network PPO trains: extend() adds actions without moving the old logits, and the
rollout's act() gives the update's numbers bit for bit.

Run: python -m pytest -q tests/test_policy.py
"""

import gymnasium as gym
import numpy as np
import pytest
import torch

from policy import Agent
from ppo import seed_everything
from tests.ppo_helpers import dict_space


@pytest.mark.parametrize("space", ["dict", "box"])
def test_extend_keeps_old_logits_and_sets_prior(space):
    seed_everything(2)
    obs_space = dict_space() if space == "dict" else gym.spaces.Box(-1, 1, (3,), np.float32)
    agent = Agent(obs_space, 17)
    with torch.no_grad():  # a trained-looking head, so the test does not pass by near-zero logits
        agent.actor[-1].weight.mul_(300.0)
        agent.actor[-1].bias.normal_(0.0, 2.0)
    obs = {k: torch.as_tensor(np.stack([s.sample() for _ in range(8)])) for k, s in obs_space.items()} \
        if space == "dict" else torch.rand(8, 3) * 2 - 1
    before = agent.logits(obs)
    agent.extend(3, prior=0.05, obs=obs)
    after = agent.logits(obs)
    assert agent.n_actions == 20 and after.shape == (8, 20)
    assert torch.equal(after[:, :17], before)
    p_new = after.softmax(-1)[:, 17:]
    assert 0.03 < p_new.mean().item() < 0.08


def test_so_many_new_actions_that_the_prior_cannot_hold_each_start_with_an_equal_share():
    """16 fresh code actions at prior 0.1 would need 1.6 of the probability: each gets 1/17, as much as the old
    actions keep between them (it stopped the run with an assertion before); 3 at 0.1 keep 0.1 each."""
    for n_new, each in [(16, 1 / 17), (3, 0.1)]:
        agent = Agent(gym.spaces.Box(-1, 1, (3,), np.float32), 6)
        obs = torch.zeros(4, 3)  # the last layer's input is ~0 far from training: the bias decides
        agent.extend(n_new, prior=0.1, obs=obs)
        p = agent.logits(obs).softmax(-1)
        torch.testing.assert_close(p[:, 6:], torch.full((4, n_new), each), atol=2e-3, rtol=0)


def test_extend_prior_counts_only_unmasked_logits_and_copies_a_rewritten_row():
    seed_everything(7)
    agent = Agent(gym.spaces.Box(-1, 1, (3,), np.float32), 6)
    with torch.no_grad():  # the masked actions 4 and 5 hold nearly all the probability mass
        agent.actor[-1].bias.copy_(torch.tensor([0.0, 0.5, -0.5, 1.0, 12.0, 12.0]))
        agent.actor[-1].weight.normal_(0.0, 0.3)
    mask = np.array([True, True, True, True, False, False])
    obs = torch.rand(64, 3) * 2 - 1
    before = agent.logits(obs)
    agent.extend(2, prior=0.05, obs=obs, mask=mask, copy_from=[None, 3])  # action 7 rewrites action 3
    after = agent.logits(obs)
    torch.testing.assert_close(after[:, :6], before)
    torch.testing.assert_close(after[:, 7], before[:, 3])  # v2 starts from v1's row...
    assert torch.equal(agent.actor[-1].weight[7], agent.actor[-1].weight[3])  # ...weights and bias
    p = agent.logits(obs, torch.tensor(np.r_[mask, True, False])).softmax(-1)
    assert 0.04 < p[:, 6].mean().item() < 0.06  # the prior among the actions the mask allows


@pytest.mark.parametrize("space", ["dict", "box"])
def test_act_gives_get_action_and_values_numbers_bit_for_bit(space):
    """The rollout acts with Agent.act; the update recomputes log-probs with get_action_and_value: PPO's
    first ratio is 1 only if both give the same numbers, to the last bit, masked or not."""
    seed_everything(5)
    sp = dict_space() if space == "dict" else gym.spaces.Box(-1, 1, (3,), np.float32)
    agent = Agent(sp, 6)
    with torch.no_grad():
        agent.actor[-1].bias.copy_(torch.linspace(-2.0, 3.0, 6))  # a skewed policy, not ~uniform
    obs = ({k: torch.as_tensor(np.stack([s.sample() for _ in range(64)])) for k, s in sp.items()}
           if space == "dict" else torch.rand(64, 3) * 2 - 1)
    for mask in (None, torch.rand(64, 6) < 0.7):
        if mask is not None:
            mask[:, 0] = True
        torch.manual_seed(6)
        action, logprob, _, value = agent.get_action_and_value(obs, mask=mask)
        torch.manual_seed(6)
        got = agent.act(obs, mask)
        for want, have in zip((action, logprob, value), got, strict=True):
            assert torch.equal(want, have)
        assert not got[1].requires_grad

"""The policy network PPO trains: an actor-critic whose discrete action space can grow.

For Crafter's Dict(image, inventory) observations it is CleanRL's Nature CNN (plus an inventory MLP)
under one shared body; for flat Box observations (CartPole, the tests) two small tanh MLPs. The actor's
last layer grows when the fast agent's code actions join (`Agent.extend`): old logits never change,
a new action starts at a small probability (or as a copy of the action it rewrites), and masked
actions get a constant logit, so they carry neither probability nor gradient. ppo.py trains it.
"""

from __future__ import annotations

import hashlib

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Categorical

MASKED_LOGIT = -1e8  # finite, so softmax/entropy stay NaN-free; exp() underflows to exactly 0


def layer_init(layer: nn.Module, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Module:
    """Orthogonal init (CleanRL): keeps activations' scale through ReLU stacks."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias_const)
    return layer


Obs = torch.Tensor | dict[str, torch.Tensor]


def sample(probs: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF sampling from (B, A) probs with uniforms drawn from the CPU generator, so a CUDA
    run samples the same actions as a CPU run of the same seed. Zero-probability (masked) actions
    can never be drawn: the CDF does not rise at them (the clamp guards u rounding up to the total)."""
    cdf = probs.cumsum(-1)  # (B, A)
    total = cdf[:, -1:]
    u = torch.rand(probs.shape[0], 1).to(probs.device, non_blocking=True) * total
    last = (cdf < total).sum(-1)  # the last action with non-zero probability
    return torch.minimum((cdf <= u).sum(-1), last)


class Agent(nn.Module):
    """Actor-critic. Dict(image, inventory) -> Nature CNN + inventory MLP shared by both heads;
    Box -> separate tanh MLPs for actor and critic (CleanRL's ppo.py, robust on CartPole)."""

    def __init__(self, obs_space: gym.Space, n_actions: int):
        super().__init__()
        self.n_actions = n_actions
        if isinstance(obs_space, gym.spaces.Dict):
            h, w, c = obs_space["image"].shape
            self.cnn = nn.Sequential(
                layer_init(nn.Conv2d(c, 32, 8, stride=4)), nn.ReLU(),  # (B, 32, 15, 15)
                layer_init(nn.Conv2d(32, 64, 4, stride=2)), nn.ReLU(),  # (B, 64, 6, 6)
                # flattened before its ReLU (the same numbers): the gradient coming back from the flat body then
                # meets a flat activation, not a channels_last one (mixed layouts: ~1.3 ms per 256-sample minibatch)
                layer_init(nn.Conv2d(64, 64, 3, stride=1)), nn.Flatten(), nn.ReLU(),  # (B, 64 * 4 * 4)
            )
            with torch.no_grad():
                n_flat = self.cnn(torch.zeros(1, c, h, w)).shape[1]
            n_inv = obs_space["inventory"].shape[0]
            self.inv_scale = float(np.max(obs_space["inventory"].high))
            self.inv_mlp = nn.Sequential(layer_init(nn.Linear(n_inv, 64)), nn.ReLU())
            self.body = nn.Sequential(layer_init(nn.Linear(n_flat + 64, 512)), nn.ReLU())
            self.actor = nn.Sequential(layer_init(nn.Linear(512, n_actions), std=0.01))
            self.critic = nn.Sequential(layer_init(nn.Linear(512, 1), std=1.0))
        else:
            n_in = int(np.prod(obs_space.shape))
            self.cnn = None

            def mlp(n_out: int, std: float) -> nn.Sequential:
                return nn.Sequential(
                    layer_init(nn.Linear(n_in, 64)), nn.Tanh(),
                    layer_init(nn.Linear(64, 64)), nn.Tanh(),
                    layer_init(nn.Linear(64, n_out), std=std),
                )

            self.actor, self.critic = mlp(n_actions, 0.01), mlp(1, 1.0)

    def features(self, obs: Obs) -> torch.Tensor:
        """Shared features for both heads; uint8 pixels are scaled here so storage stays uint8. Under autocast
        they go straight to bfloat16 (the same numbers), sparing the update an fp32 copy and its cast (~1/5)."""
        if self.cnn is None:
            return obs.float().flatten(1)
        dev = obs["image"].device.type
        dtype = torch.get_autocast_dtype(dev) if torch.is_autocast_enabled(dev) else torch.float32
        img = obs["image"].permute(0, 3, 1, 2).to(dtype).div_(255.0)  # (B, C, H, W), channels_last in memory
        inv = obs["inventory"].float() / self.inv_scale
        return self.body(torch.cat([self.cnn(img), self.inv_mlp(inv)], dim=1))

    def get_value(self, obs: Obs) -> torch.Tensor:
        return self.critic(self.features(obs)).squeeze(-1)

    def logits(self, obs: Obs, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Masked logits: torch.where gives masked entries a constant, hence no gradient."""
        logits = self.actor(self.features(obs))
        return logits if mask is None else torch.where(mask, logits, MASKED_LOGIT)

    def get_action_and_value(self, obs: Obs, action: torch.Tensor | None = None,
                             mask: torch.Tensor | None = None, bf16: bool = False, teacher: torch.Tensor | None = None):
        """Returns (action, logprob, entropy, value); samples an action when none is given. With `teacher`
        ((B,) actions, -1 where none), their log-probabilities follow as a fifth item (0 where -1).
        bf16: the shared features under bfloat16 autocast; the heads, log-probs and value stay fp32, so
        PPO's ratio exp(new - old logprob) is not rounded to bfloat16's 8 bits of mantissa."""
        with torch.autocast(self.actor[-1].weight.device.type, dtype=torch.bfloat16, enabled=bf16):
            f = self.features(obs)
        f = f.float()
        logits = self.actor(f)
        if mask is not None:
            logits = torch.where(mask, logits, MASKED_LOGIT)
        dist = Categorical(logits=logits, validate_args=False)  # its argument checks cost ~0.2 ms a call
        if action is None:
            action = sample(dist.probs)
        out = action, dist.log_prob(action), dist.entropy(), self.critic(f).squeeze(-1)
        return out if teacher is None else (*out, dist.log_prob(teacher.clamp(min=0)) * (teacher >= 0))

    @torch.inference_mode()
    def act(self, obs: Obs, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(action, logprob, value) for the rollout, no gradient: get_action_and_value's numbers, bit for bit
        (Categorical's own ops), without the entropy and the distribution object acting does not need."""
        f = self.features(obs)
        logits = self.actor(f)
        if mask is not None:
            logits = torch.where(mask, logits, MASKED_LOGIT)
        logp = logits - logits.logsumexp(dim=-1, keepdim=True)  # what Categorical(logits=...) keeps
        action = sample(logp.softmax(dim=-1))
        return action, logp.gather(-1, action[:, None]).squeeze(-1), self.critic(f).squeeze(-1)

    @torch.no_grad()
    def extend(self, n_new: int, prior: float = 0.05, obs: Obs | None = None, mask: np.ndarray | None = None,
               copy_from: list[int | None] | None = None) -> None:
        """Add n_new actions. Old rows are untouched, so old logits are unchanged for every input.

        New action i starts as a copy of old action copy_from[i] (weights and bias) when that is given:
        a rewritten code action (v2) does v1's job, so what the policy learned about when to call v1
        carries over instead of being learned again from a fresh row. Every other new row gets zero
        weights and a bias = mean logsumexp(old logits) + log(p / (1 - n p)) (n: the fresh rows), so on
        `obs` (or, without obs, where the last layer's input is 0) each has probability ~= `prior`.
        The logsumexp runs over the old actions `mask` allows ((n_old,) or (B, n_old) bool) only: masked
        actions carry no probability, and counting their logits would give the new action less than
        `prior`. So many fresh rows that n p would leave the old actions together less than one new action's
        share (a plan of 15 code actions with prior 0.1) start with 1 / (n + 1) each instead: never more than
        the old actions keep between them. The parameters are resized in place, so an optimizer keeps
        referencing them; PPO pads its Adam moments on the next train() call."""
        copy_from = list(copy_from) if copy_from is not None else [None] * n_new
        fresh = sum(c is None for c in copy_from)
        assert n_new >= 0 and len(copy_from) == n_new and 0 < prior < 1, "need n_new >= 0 and 0 < prior < 1"
        prior = min(prior, 1 / (fresh + 1))
        head = self.actor[-1]
        old_logits = self.actor(self.features(obs)) if obs is not None else head.bias[None]
        if mask is not None:
            old_logits = torch.where(torch.as_tensor(mask, device=old_logits.device), old_logits, MASKED_LOGIT)
        bias = torch.logsumexp(old_logits, dim=1).mean() + np.log(prior / (1 - fresh * prior))
        rows = [(head.weight[c], head.bias[c]) if c is not None else (head.weight.new_zeros(head.in_features), bias)
                for c in copy_from]
        if rows:
            head.weight.data = torch.cat([head.weight, torch.stack([w for w, _ in rows])])
            head.bias.data = torch.cat([head.bias, torch.stack([b for _, b in rows])])
        head.out_features = self.n_actions = self.n_actions + n_new


def identity(agent: nn.Module) -> str:
    """The network a checkpoint's weights belong to: its class and a digest of every parameter's and buffer's
    name and shape, as built for the task before any code action joins. config.json keeps it, so --resume
    with a different network (a fork that changed this file) stops with a sentence, not a state-dict error."""
    shapes = ";".join(f"{name}:{tuple(t.shape)}" for name, t in agent.state_dict().items())
    return f"{type(agent).__module__}.{type(agent).__qualname__} {hashlib.sha256(shapes.encode()).hexdigest()[:12]}"

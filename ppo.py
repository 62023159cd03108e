"""Hand-written PPO (CleanRL style) for vector envs whose discrete action space grows.

This is the RL half of RL-GPT: the policy picks among the 17 Crafter primitives plus any accepted
code actions (macro actions that run several primitive steps). Everything follows the PPO details of
Huang et al. ("The 37 implementation details of PPO") with four additions:
  * semi-MDP returns (compute_gae): a transition of n primitive steps (`prim_steps`) brings the env's discounted
    reward sum gamma^i r_i (env.CodeActionWrapper computes it); its bootstrap is discounted by gamma^n, its GAE
    trace by (gamma * lambda)^n,
  * truncated episodes bootstrap from V(final_obs) instead of being treated as terminal,
  * `Agent.extend(n_new)` (policy.py) adds n_new logits without changing the old ones; PPO pads the Adam moments,
  * under a plan with "follow_order" (envs' `follow_order`), a cross-entropy towards the first code action of the
    plan's order that may start, fading to 0 (kickstarting, Schmitt et al. 2018; `_teach_weight`).

Use it from Python (train.py calls train() once per RL-GPT iteration, on the same envs):

    agent = policy.Agent(envs.single_observation_space, envs.single_action_space.n)
    ppo = PPO(agent, PPOConfig(), device="cuda", total_steps=1_000_000)
    stats = ppo.train(envs, 100_000, on_log=lambda metrics, step: ...)

The env budget, SPS and `global_step` always count primitive env steps (sum of info["prim_steps"]). PPO never seeds
an env: the env's own seeding decides its worlds (env.make_vec_env). On CUDA the rollout loop waits for the GPU once
per vector step, for the sampled actions env.step needs; rewards, step counts and done flags stay in NumPy and go to
the device once per rollout. Under torchrun PPO stays one run: steps and episode stats are summed over the ranks,
gradients averaged, weights broadcast from rank 0 (distributed.py); without torch.distributed nothing here changes.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn

import distributed
from policy import Agent, Obs


@dataclass
class PPOConfig:
    num_steps: int = 128
    """rollout length per env (decisions, not primitive steps) between two updates"""
    num_minibatches: int = 4
    """number of minibatches each rollout batch is split into"""
    update_epochs: int = 4
    """passes over the rollout batch per update"""
    learning_rate: float = 2.5e-4
    """Adam learning rate at the start of the run"""
    anneal_lr: bool = True
    """linearly anneal the learning rate to 0 over `total_steps` primitive env steps"""
    gamma: float = 0.99
    """discount per primitive step; a macro action of `prim_steps` steps is discounted by gamma**prim_steps"""
    gae_lambda: float = 0.95
    """GAE lambda, per primitive step: a decision of n primitive steps decays its trace by (gamma * lambda)**n"""
    norm_adv: bool = True
    """normalise advantages per minibatch"""
    clip_coef: float = 0.2
    """surrogate clipping coefficient"""
    clip_vloss: bool = True
    """clip the value loss around the rollout's value predictions"""
    ent_coef: float = 0.01
    """entropy bonus coefficient"""
    vf_coef: float = 0.5
    """value loss coefficient"""
    max_grad_norm: float = 0.5
    """global gradient-norm clip"""
    target_kl: float | None = None
    """stop the update epochs early once approx_kl exceeds this (None: never)"""
    teacher_coef: float = 1.0
    """under a plan with "follow_order": weight of the cross-entropy towards the first code action of the plan's
    order that may start (kickstarting, Schmitt et al. 2018), added to the PPO loss"""
    teacher_frac: float = 0.2
    """that weight falls linearly as if to reach 0 at this fraction of the run's total_steps, held at teacher_min"""
    teacher_min: float = 0.2
    """the weight's floor: the order is learnt at the full weight, then RL may leave it where that pays while the
    teacher still holds it (on crafter at 1M, better than falling to 0 early or late: docs/results.md)"""
    new_action_prior: float = 0.05
    """probability each newly added (code) action starts with, so PPO tries it at all (n at once: at most 1/(n+1))"""
    precision: str = "auto"
    """fp32 | bf16 | auto: the update's CNN in bfloat16 (torch.autocast) on CPUs with bf16 units, where it
    measured ~1.5x faster and learned the same (docs/measurements.md); fp32 elsewhere. Acting and the heads stay fp32"""


def compute_gae(rewards: torch.Tensor, values: torch.Tensor, next_values: torch.Tensor,
                terminated: torch.Tensor, dones: torch.Tensor, prim_steps: torch.Tensor, gamma: float,
                gae_lambda: float) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE over (T, N) tensors of decisions. rewards[t] is the semi-MDP return sum_i gamma^i r_i of a transition of
    n_t = prim_steps[t] primitive steps; next_values[t] is V of the observation after it (V(final_obs) when the episode
    ended there); terminated zeroes that bootstrap, dones (terminated or truncated) cuts the trace:

        delta_t = R_t + gamma^n_t * V(s_t+1) - V(s_t),    A_t = delta_t + (gamma * lambda)^n_t * A_t+1

    lambda decays once per primitive step, not once per decision: the lambda-return then weighs the returns ahead by
    how much env time lies between them, as GAE of a primitive policy does, whatever the policy's mix of primitive
    and code actions. (lambda once per decision, gamma^n * lambda, is also a consistent lambda-return, but over
    decisions: a 64-step code action would pass credit 64 times further in env time than a primitive step, so the
    bias-variance trade-off would change with the actions chosen.) The n-step returns that would end inside a code
    action cannot be formed (no value there); their weight falls on the return that ends with it."""
    discounts = gamma ** prim_steps
    trace = (gamma * gae_lambda) ** prim_steps
    advantages = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        delta = rewards[t] + discounts[t] * (1.0 - terminated[t]) * next_values[t] - values[t]
        last = delta + trace[t] * (1.0 - dones[t]) * last
        advantages[t] = last
    return advantages, advantages + values


def _as_mask(action_mask: np.ndarray | None, n_env: int, n_act: int, dev: torch.device) -> torch.Tensor | None:
    mask = None if action_mask is None else torch.as_tensor(  # (n_act,) for every env, or (n_env, n_act)
        np.broadcast_to(action_mask, (n_env, n_act)).copy(), device=dev)
    assert mask is None or mask.any(dim=1).all(), "every env needs at least one allowed action"
    return mask


def _call(envs: gym.vector.VectorEnv, name: str) -> tuple:
    """envs.call(name), or (None,) for envs that lack it (a plain env without env.CodeActionWrapper)."""
    try:
        return envs.call(name)
    except AttributeError:
        return (None,)


def _env_mask(per_env: list | tuple, dev: torch.device) -> torch.Tensor | None:
    """The envs' own action masks ((n_env, n_act): CodeActionWrapper.action_mask, stacked) or None where the envs
    have none (no code action with an initiation): from envs.call("action_mask") or a step's infos."""
    if any(m is None for m in per_env):
        return None
    return torch.as_tensor(np.vstack(per_env), dtype=torch.bool, device=dev)


def step_info(infos: dict, key: str, default, n: int) -> np.ndarray:
    """One value of `key` per env for this vector step, whether its episode went on (`infos`, with a
    `_key` mask) or just ended (same-step autoreset moves that step's info to infos["final_info"])."""
    out = np.full(n, default, dtype=object if isinstance(default, str) else None)
    for src in (infos, infos.get("final_info", {})):
        if key in src:
            out = np.where(src["_" + key], src[key], out)
    return out


@dataclass
class Rollout:
    """One rollout's (T, N, ...) buffers, allocated once per train() call; what the envs return stays in NumPy."""
    obs: Obs
    actions: torch.Tensor
    logprobs: torch.Tensor
    values: torch.Tensor
    next_values: torch.Tensor  # V(obs after the decision): V(final_obs) by _rollout where truncated, else _advantages
    rewards: np.ndarray  # semi-MDP returns sum_i gamma^i r_i
    terminated: np.ndarray
    dones: np.ndarray  # terminated or truncated
    prim_steps: np.ndarray  # primitive steps each decision took
    masks: torch.Tensor  # (T, N, n_act) bool: what each decision could choose, so the update scores it under that
    teacher: torch.Tensor  # (T, N) long: the action the plan's order teaches there (-1: none, or no teacher)

    def map(self, fn: Callable) -> Rollout:
        """fn applied to every buffer (to dict observations key by key): the steps a rollout used, the flat batch."""
        each = lambda x: {k: fn(v) for k, v in x.items()} if isinstance(x, dict) else fn(x)
        return Rollout(**{f.name: each(getattr(self, f.name)) for f in fields(self)})


class PPO:
    """Owns the optimizer, the step counter and the envs' current observations; keeps them across train() calls."""

    def __init__(self, agent: Agent, cfg: PPOConfig, device: str | torch.device = "cpu",
                 total_steps: int | None = None):
        want_cuda = torch.device(device).type == "cuda"
        self.device = torch.device(device if not want_cuda or torch.cuda.is_available() else "cpu")
        self.agent, self.cfg, self.total_steps = agent.to(self.device), cfg, total_steps
        # foreach (CUDA's default) on the CPU too: the same numbers, bit for bit, at half the time a step
        self.optimizer = torch.optim.Adam(agent.parameters(), lr=cfg.learning_rate, eps=1e-5, foreach=True)
        self.bf16 = use_bf16(cfg.precision, self.device)
        self.global_step, self.envs, self.teach = 0, None, None  # teach: the plan's order (train())
        self.next_obs: Obs | None = None  # current observation batch; also handy for Agent.extend

    # ---- helpers -------------------------------------------------------------------------
    def _to_tensor(self, obs) -> Obs:
        """Host -> device without waiting for the GPU: a non_blocking copy from pageable memory is
        staged by CUDA before it returns, so the NumPy array may be reused at once."""
        to = lambda v: torch.from_numpy(np.ascontiguousarray(v)).to(self.device, non_blocking=True)
        return {k: to(v) for k, v in obs.items()} if isinstance(obs, dict) else to(obs)

    def _sync_optimizer(self) -> None:
        """After Agent.extend, pad Adam's moments to the grown parameters: old rows keep theirs, new rows get exp_avg 0
        and the old rows' mean exp_avg_sq, so their first steps are usual-sized, not sqrt(1/(1-beta2)) times larger."""
        for p, state in self.optimizer.state.items():
            for name in ("exp_avg", "exp_avg_sq"):
                m = state.get(name)
                if m is None or m.shape == p.shape:
                    continue
                fill = 0.0 if name == "exp_avg" else m.mean().item()
                pad = m.new_full((p.shape[0] - m.shape[0], *m.shape[1:]), fill)
                state[name] = torch.cat([m, pad])

    def _lr_frac(self, call_start: int, call_steps: int) -> float:
        """Fraction of the run left; without total_steps, anneal over this call alone."""
        if self.total_steps is None:
            return max(0.0, 1.0 - (self.global_step - call_start) / call_steps)
        return max(0.0, 1.0 - self.global_step / self.total_steps)

    def _teach_weight(self) -> float:
        """The teacher's weight now: teacher_coef, falling linearly towards 0 at teacher_frac of total_steps but held
        at teacher_min from there (teacher_coef if lower: 0 teaches nothing); 0 without a plan order to follow (or
        without total_steps)."""
        if self.teach is None or not self.total_steps:
            return 0.0
        left = 1.0 - self.global_step / (self.cfg.teacher_frac * self.total_steps) if self.cfg.teacher_frac > 0 else 0
        return max(min(self.cfg.teacher_min, self.cfg.teacher_coef), self.cfg.teacher_coef * max(0.0, left))

    # ---- main loop: rollout -> advantages (GAE) -> update ---------------------------------
    def train(self, envs: gym.vector.VectorEnv, steps: int, *, action_mask: np.ndarray | None = None,
              on_step: Callable[[np.ndarray, dict], None] | None = None, progress: Callable[[int], None] | None = None,
              on_log: Callable[[dict, int], None] | None = None,
              on_update: Callable[[int], np.ndarray | None] | None = None) -> dict:
        """Collect rollouts and update until `steps` more primitive env steps are done; returns the stats of the
        episodes that finished in this call. Envs live across calls: an env PPO has stepped before is never reset
        (grow it in place with env.set_vec_code_actions, the agent with Agent.extend), so neither a call's end, a
        checkpoint nor new code actions cut an episode; a new env is reset once, without a seed. The last rollout
        ends within one vector step of the budget and is learned from like any other: GAE bootstraps from V(next obs)
        there, as at every rollout boundary. The learning rate anneals over the whole run's `total_steps`.
        `action_mask` ((n_act,) or (n_env, n_act) bool): what the plan allows in every state; the envs' own per-state
        masks (code actions' initiation conditions) are and-ed with it. Hooks (all optional):
          on_step(actions, infos), progress(primitive steps, all ranks): after every vector step;
          on_log(metrics, global_step): after every update, with CleanRL's loss and chart names;
          on_update(global_step): then, at a rollout boundary where nothing is in flight, so a checkpoint there
            learns the same as none; a mask it returns replaces action_mask (e.g. the curriculum moved on)."""
        cfg, agent, dev = self.cfg, self.agent, self.device
        n_env, T, n_act, space = envs.num_envs, cfg.num_steps, agent.n_actions, envs.single_observation_space
        assert envs.single_action_space.n == n_act, "env and agent disagree on the number of actions"
        self._sync_optimizer()
        if envs is not self.envs:  # a new env: its first episodes; its own seeds decide the worlds
            self.envs, self.next_obs = envs, self._to_tensor(envs.reset()[0])
        distributed.broadcast_weights(agent)  # after extend() or a resume: every rank continues from rank 0's weights
        mask = _as_mask(action_mask, n_env, n_act, dev)  # the plan's, the same in every state
        env_mask = _env_mask(_call(envs, "action_mask"), dev)  # code actions' initiation conditions, per state
        order, n_base = _call(envs, "follow_order")[0], _call(envs, "n_base")[0]  # the plan's order teaches, if set
        self.teach = None if order is None else torch.as_tensor([n_base + i for i in order], device=dev)
        zeros = lambda shape=(), dtype=torch.float32: torch.zeros((T, n_env, *shape), dtype=dtype, device=dev)
        obs = ({k: zeros(s.shape, self.next_obs[k].dtype) for k, s in space.items()}
               if isinstance(space, gym.spaces.Dict) else zeros(space.shape))
        buf = Rollout(obs, *(zeros() for _ in range(4)), *(np.zeros((T, n_env), np.float32) for _ in range(4)),
                      torch.ones((T, n_env, n_act), dtype=torch.bool, device=dev),
                      torch.full((T, n_env), -1, dtype=torch.long, device=dev))

        start_step, t0, episodes = self.global_step, time.time(), []  # episodes: (return, length, success)
        while self.global_step - start_step < steps:
            if cfg.anneal_lr:
                self.optimizer.param_groups[0]["lr"] = cfg.learning_rate * self._lr_frac(start_step, steps)
            batch, new, env_mask = self._rollout(envs, buf, start_step + steps, mask, env_mask, on_step, progress)
            advantages, returns = self._advantages(batch)
            metrics = self._update(batch, advantages, returns, mask is not None or env_mask is not None)
            episodes += new
            if on_log is not None:
                if new:
                    r, length, ok = np.array(new).T
                    metrics["charts/episodic_return"] = float(r.mean())
                    metrics["charts/episodic_length"] = float(length.mean())
                    if not np.isnan(ok).all():
                        metrics["charts/success_rate"] = float(np.nanmean(ok))
                        metrics["charts/success_episodes"] = int((~np.isnan(ok)).sum())
                metrics["charts/learning_rate"] = self.optimizer.param_groups[0]["lr"]
                metrics["charts/SPS"] = int((self.global_step - start_step) / (time.time() - t0))
                on_log(metrics, self.global_step)
            if on_update is not None and (new_mask := on_update(self.global_step)) is not None:
                mask = _as_mask(new_mask, n_env, n_act, dev)

        r, length, ok = np.array(episodes).T if episodes else (np.array([np.nan]),) * 3
        known, done = ~np.isnan(ok), self.global_step - start_step
        return {"episodes": len(episodes), "mean_return": float(np.mean(r)), "mean_length": float(np.mean(length)),
                "success_rate": float(np.mean(ok[known])) if known.any() else float("nan"),
                "success_episodes": int(known.sum()), "env_steps": done, "sps": done / (time.time() - t0)}

    @torch.no_grad()
    def _rollout(self, envs: gym.vector.VectorEnv, buf: Rollout, until: int, mask: torch.Tensor | None,
                 env_mask: torch.Tensor | None, on_step, progress) -> tuple[Rollout, list, torch.Tensor | None]:
        """Up to num_steps vector steps into `buf` (fewer once global_step reaches `until`, the budget); returns the
        steps filled (views of `buf`), episodes any rank finished and the envs' latest mask, for the next rollout."""
        agent, dev, n_env, episodes = self.agent, self.device, envs.num_envs, []
        for t in range(self.cfg.num_steps):
            if isinstance(buf.obs, dict):
                for k in buf.obs:
                    buf.obs[k][t] = self.next_obs[k]
            else:
                buf.obs[t] = self.next_obs
            step_mask = mask if env_mask is None else env_mask if mask is None else mask & env_mask
            if step_mask is not None:
                buf.masks[t] = step_mask
            if self.teach is not None:  # the first code action of the plan's order that may start (-1: none may)
                may = step_mask[:, self.teach]
                buf.teacher[t] = torch.where(may.any(1), self.teach[may.int().argmax(1)], -1)
            action, logprob, value = agent.act(self.next_obs, step_mask)
            buf.actions[t], buf.logprobs[t], buf.values[t] = action, logprob, value
            act_np = action.cpu().numpy()  # the one wait for the GPU per vector step
            obs, reward, term, trunc, infos = envs.step(act_np)
            buf.prim_steps[t] = step_info(infos, "prim_steps", 1, n_env)
            self.next_obs = self._to_tensor(obs)
            if "action_mask" in infos:
                env_mask = _env_mask([infos["action_mask"]], dev)
            buf.rewards[t], buf.terminated[t], buf.dones[t] = reward, term, term | trunc
            trunc_only = np.flatnonzero(trunc & ~term)
            if len(trunc_only):  # bootstrap truncated episodes from their real last observation
                fo = [infos["final_obs"][i] for i in trunc_only]
                fo = {k: np.stack([o[k] for o in fo]) for k in fo[0]} if isinstance(fo[0], dict) else np.stack(fo)
                buf.next_values[t, torch.as_tensor(trunc_only, device=dev)] = agent.get_value(self._to_tensor(fo))
            if "episode" in (final := infos.get("final_info", {})):
                ep = final["episode"]
                for i in np.flatnonzero(final["_episode"]):
                    ok = float(ep["success"][i]) if "success" in ep else float("nan")
                    episodes.append((float(ep["r"][i]), int(ep["l"][i]), ok))
            n_new = distributed.sum_over_ranks(int(buf.prim_steps[t].sum()))  # the budget is global: one count
            self.global_step += n_new
            if on_step is not None:
                on_step(act_np, infos)
            if progress is not None:
                progress(n_new)
            if self.global_step >= until:  # budget spent: learn from the partial rollout
                break
        return buf.map(lambda x: x[:t + 1]), distributed.all_gather(episodes), env_mask

    @torch.no_grad()
    def _advantages(self, batch: Rollout) -> tuple[torch.Tensor, torch.Tensor]:
        """(advantages, returns) by compute_gae. next_values: V(s_t+1) mid-episode, V(next obs) after the last
        decision (a rollout boundary cuts no episode); where an episode was truncated, the V(final_obs) _rollout
        put there; where it terminated, whatever is there (compute_gae zeroes it)."""
        host = lambda x: torch.as_tensor(x, device=self.device)  # NumPy -> device, once per rollout
        nv = torch.cat([batch.values[1:], self.agent.get_value(self.next_obs)[None]])
        done = host(batch.dones)
        batch.next_values[:] = torch.where(done.bool(), batch.next_values, nv)
        return compute_gae(host(batch.rewards), batch.values, batch.next_values, host(batch.terminated), done,
                           host(batch.prim_steps), self.cfg.gamma, self.cfg.gae_lambda)

    def _update(self, batch: Rollout, advantages: torch.Tensor, returns: torch.Tensor, masked: bool) -> dict:
        """PPO epochs over the flattened rollout, scoring each action under the mask it was chosen under
        (batch.masks) if `masked`; returns CleanRL-named loss metrics."""
        cfg, agent = self.cfg, self.agent
        B = batch.actions.numel()
        b = batch.map(lambda x: x.reshape(B, *x.shape[2:]))  # (T, N, ...) -> (T*N, ...)
        b_obs, b_actions, b_logprobs, b_values = b.obs, b.actions.long(), b.logprobs, b.values
        b_adv, b_returns, b_masks = advantages.reshape(B), returns.reshape(B), b.masks if masked else None
        mb_size = max(1, B // cfg.num_minibatches)  # a budget-cut last rollout can be tiny
        clipfracs, approx_kl, old_approx_kl = [], torch.zeros(()), torch.zeros(())
        teach, teacher_loss = self._teach_weight(), torch.zeros(())
        for _ in range(cfg.update_epochs):
            perm = torch.randperm(B).to(self.device)  # CPU generator, as in sample()
            for start in range(0, B - mb_size + 1, mb_size):
                idx = perm[start:start + mb_size]
                take = lambda v, idx=idx: v.index_select(0, idx)  # ~15x faster than v[idx] on uint8 images here
                mb_obs = {k: take(v) for k, v in b_obs.items()} if isinstance(b_obs, dict) else take(b_obs)
                mb_mask = None if b_masks is None else b_masks[idx]
                teacher = b.teacher[idx] if teach else None
                _, newlogprob, entropy, newvalue, *teacher_logprob = agent.get_action_and_value(
                    mb_obs, b_actions[idx], mb_mask, bf16=self.bf16, teacher=teacher)
                logratio = newlogprob - b_logprobs[idx]
                ratio = logratio.exp()
                with torch.no_grad():
                    old_approx_kl = (-logratio).mean()
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfracs.append(((ratio - 1.0).abs() > cfg.clip_coef).float().mean())
                mb_adv, mb_values, mb_returns = b_adv[idx], b_values[idx], b_returns[idx]
                if cfg.norm_adv and len(mb_adv) > 1:  # a one-sample minibatch has no spread to normalise by
                    mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                pg_loss = torch.max(-mb_adv * ratio, -mb_adv * ratio.clamp(1 - cfg.clip_coef, 1 + cfg.clip_coef)).mean()
                if cfg.clip_vloss:
                    v_clipped = mb_values + (newvalue - mb_values).clamp(-cfg.clip_coef, cfg.clip_coef)
                    v_loss = 0.5 * torch.max((newvalue - mb_returns) ** 2, (v_clipped - mb_returns) ** 2).mean()
                else:
                    v_loss = 0.5 * ((newvalue - mb_returns) ** 2).mean()
                entropy_loss = entropy.mean()
                loss = pg_loss - cfg.ent_coef * entropy_loss + cfg.vf_coef * v_loss
                if teacher is not None:  # cross-entropy towards the plan's order, where it names an action
                    n_taught = (teacher >= 0).sum().clamp(min=1)  # the log-prob is 0 where none is named
                    teacher_loss = -teacher_logprob[0].sum() / n_taught
                    loss = loss + teach * teacher_loss
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                distributed.average_gradients(agent.parameters())
                nn.utils.clip_grad_norm_(agent.parameters(), cfg.max_grad_norm)
                self.optimizer.step()
            if cfg.target_kl is not None and distributed.mean_over_ranks(approx_kl) > cfg.target_kl:
                break
        y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
        var_y = np.var(y_true)
        explained_var = float("nan") if var_y == 0 else float(1 - np.var(y_true - y_pred) / var_y)
        taught = {}
        if self.teach is not None:  # the decisions where the order names a code action, and how often the policy
            named = b.teacher >= 0  # chose it (summed over the ranks)
            followed = named & (b_actions == b.teacher)
            taught = {"losses/teacher_loss": teacher_loss.item(), "charts/teacher_coef": teach,
                      "charts/order_named": distributed.sum_over_ranks(int(named.sum())),
                      "charts/order_followed": distributed.sum_over_ranks(int(followed.sum()))}
        return {"losses/policy_loss": pg_loss.item(), "losses/value_loss": v_loss.item(),
                "losses/entropy": entropy_loss.item(), "losses/old_approx_kl": old_approx_kl.item(),
                "losses/approx_kl": approx_kl.item(), "losses/clipfrac": torch.stack(clipfracs).mean().item(),
                "losses/explained_variance": explained_var, **taught}

    # ---- checkpoints ---------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Everything PPO itself needs to go on exactly; the process's RNG states are the checkpoint's
        (run_dir.save_checkpoint), since they are not PPO's alone."""
        return {"agent": self.agent.state_dict(), "optimizer": self.optimizer.state_dict(),
                "n_actions": self.agent.n_actions, "global_step": self.global_step, "cfg": asdict(self.cfg)}

    def load_state_dict(self, d: dict) -> None:
        """Restore exactly; an agent with fewer actions than the checkpoint is extended first."""
        grow = d["n_actions"] - self.agent.n_actions
        assert grow >= 0, "checkpoint has fewer actions than the agent"
        if grow:
            self.agent.extend(grow, prior=self.cfg.new_action_prior)
        self.agent.load_state_dict(d["agent"])
        self.optimizer.load_state_dict(d["optimizer"])
        self.global_step = d["global_step"]
        self.envs, self.next_obs = None, None  # the next train() resets whatever env it gets


PRECISIONS = ("auto", "fp32", "bf16")


def use_bf16(precision: str, device: torch.device) -> bool:
    """The update in bfloat16? `auto` says yes on CPUs with native bf16 units (AVX512-BF16 or AMX), where a
    NatureCNN minibatch update measured 1.5-2x faster (docs/measurements.md); CUDA stays fp32 until measured there."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
    if precision != "auto":
        return precision == "bf16"
    return device.type == "cpu" and (torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


def seed_everything(seed: int, deterministic: bool = True) -> None:
    """Seed python, numpy and torch (CleanRL's `torch_deterministic`)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.backends.cudnn.deterministic = deterministic

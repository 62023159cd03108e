"""The command line: --help generated from the settings dataclasses' field docstrings, the checks that
turn bad input into exit code 2 and a sentence, and what --resume may change in a saved run's settings.

Kept apart from train.py so that the trainer reads as the loop it runs; the settings themselves (train.Args,
ppo.PPOConfig) are passed in, so this module never imports train.py.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib.util
import inspect
import json
import os
from dataclasses import asdict
from pathlib import Path

import torch

import env
import ppo
import skill_library
from core import Mode
from envs import minedojo_env
from llm import LLMError, configured_endpoint, validate_url

MODES, BACKENDS = tuple(m.value for m in Mode), ("auto", "http", "local", "reference")
# What --resume may change: where the LLM is and the budget; everything else shapes the saved state.
RESUMABLE = {"llm", "llm_url", "llm_model", "vision", "iterations", "total_steps", "device", "threads",
             "eval_episodes", "checkpoint_every", "capture_video", "track", "resume"}


def _field_docs(cls: type) -> dict[str, str]:
    """The string literal under each field, as CleanRL's tyro shows it: the source is the doc."""
    body = ast.parse(inspect.getsource(cls)).body[0].body
    return {a.target.id: " ".join(b.value.value.split()) for a, b in zip(body, body[1:], strict=False)
            if isinstance(a, ast.AnnAssign) and isinstance(b, ast.Expr) and isinstance(b.value.value, str)}


def _add_fields(parser: argparse.ArgumentParser, cls: type, skip: set[str] = frozenset()) -> None:
    docs = _field_docs(cls)
    group = parser.add_argument_group(cls.__name__)
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        flag, typ = "--" + f.name.replace("_", "-"), f.type.split(" |")[0]
        if typ == "bool":
            group.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=docs.get(f.name))
        else:
            group.add_argument(flag, type={"int": int, "float": float}.get(typ, str), default=f.default,
                               help=f"{docs.get(f.name, '')} (default: {f.default})", dest=f.name)


def make_parser(description: str, *settings: type) -> argparse.ArgumentParser:
    """One argument group per settings dataclass, in the order given."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    for cls in settings:
        _add_fields(parser, cls)
    return parser


def parse(parser: argparse.ArgumentParser, argv: list[str] | None, *settings: type) -> tuple:
    """One instance of each settings dataclass, filled from the command line."""
    ns = vars(parser.parse_args(argv))
    return tuple(cls(**{f.name: ns[f.name] for f in dataclasses.fields(cls)}) for cls in settings)


def given_flags(argv: list[str] | None, *settings: type) -> set[str]:
    """The settings the user typed, told apart from argparse's defaults by parsing again with a
    sentinel as every default."""
    unset, parser = object(), make_parser("", *settings)
    parser.set_defaults(**{a.dest: unset for a in parser._actions if a.dest != "help"})
    return {name for name, value in vars(parser.parse_args(argv)).items() if value is not unset}


def resumed_args(args, cfg: ppo.PPOConfig, argv: list[str] | None,
                 parser: argparse.ArgumentParser) -> tuple:
    """The saved run's settings, updated by the flags given now: those in RESUMABLE (a new endpoint,
    model or larger budget) replace the saved ones; any other flag must repeat its saved value."""
    cfg_path = Path(args.resume) / "config.json"
    if not cfg_path.is_file():
        parser.error(f"--resume {args.resume}: no config.json there (not a run directory?)")
    saved = json.loads(cfg_path.read_text())
    Args = type(args)  # train.Args, passed in (this module does not import train.py)
    unknown = sorted({*(set(saved["args"]) - {f.name for f in dataclasses.fields(Args)}),
                      *(set(saved["ppo"]) - {f.name for f in dataclasses.fields(ppo.PPOConfig)})})
    if unknown:
        parser.error(f"--resume {args.resume}: its config.json has settings this version does not know "
                     f"({', '.join(unknown)}): it was written by another version of train.py; start a new run")
    old, now = {**saved["ppo"], **saved["args"]}, {**asdict(cfg), **asdict(args)}
    flag = lambda name: "--" + name.replace("_", "-")
    given = given_flags(argv, Args, type(cfg)) - {"list_tasks", "show_prompt"}
    fixed = [f"{flag(n)} (the run has {old[n]!r}, not {now[n]!r})" for n in sorted(given - RESUMABLE)
             if n in old and old[n] != now[n]]
    fixed += [f"{flag(n)} may only grow (the run has {old[n]})" for n in ("iterations", "total_steps")
              if n in given and now[n] < old[n]]
    if fixed:
        parser.error(f"--resume {args.resume} cannot change {'; '.join(fixed)}: start a new run for that")
    finished = (Path(args.resume) / "summary.md").is_file()  # written once the last iteration is done
    iterations = now["iterations"] if "iterations" in given else old["iterations"]
    if finished and "total_steps" in given and now["total_steps"] > old["total_steps"] \
            and iterations <= old["iterations"]:
        parser.error(f"--resume {args.resume}: the run finished its {old['iterations']} iterations; a larger "
                     "--total-steps needs a larger --iterations too (the new steps go to the new iterations)")
    changed = {n: now[n] for n in sorted(given & RESUMABLE - {"resume"}) if now[n] != old.get(n)}
    if changed:
        print("resuming with " + ", ".join(f"{flag(n)} {v} (was {old.get(n)})" for n, v in changed.items()))
    saved_ppo = {"teacher_min": 0.0, **saved["ppo"]}  # a run saved before teacher_min existed taught with no floor
    return Args(**{**saved["args"], **changed, "resume": args.resume}), ppo.PPOConfig(**saved_ppo)


# PPOConfig's settings and the values each may take (target_kl may also be None: no early stop)
RANGES = {"positive": lambda v: v > 0, "0 or more": lambda v: v >= 0, "in (0, 1]": lambda v: 0 < v <= 1,
          "in [0, 1]": lambda v: 0 <= v <= 1, "a probability in (0, 1)": lambda v: 0 < v < 1}
PPO_RANGES = {"num_steps": "positive", "num_minibatches": "positive", "update_epochs": "positive",
              "learning_rate": "positive", "gamma": "in (0, 1]", "gae_lambda": "in [0, 1]", "clip_coef": "positive",
              "ent_coef": "0 or more", "vf_coef": "positive", "max_grad_norm": "positive", "target_kl": "positive",
              "teacher_coef": "0 or more", "teacher_frac": "0 or more", "teacher_min": "0 or more",
              "new_action_prior": "a probability in (0, 1)"}


def validate(args, cfg: ppo.PPOConfig, parser: argparse.ArgumentParser) -> None:
    """Bad input ends here with exit code 2 and a sentence, never with a traceback later."""
    if args.llm == "library":  # the old spelling of --llm reference, as given or in a saved run's config.json
        args.llm = "reference"
    if cfg.precision not in ppo.PRECISIONS:
        parser.error(f"--precision must be one of {ppo.PRECISIONS}, not {cfg.precision!r}")
    if args.mode not in MODES:
        parser.error(f"--mode must be one of {MODES}, not {args.mode!r}")
    if args.llm not in BACKENDS and not args.llm.startswith("replay:"):
        parser.error(f"--llm must be one of {BACKENDS} or replay:<transcript.jsonl>, not {args.llm!r}")
    if args.llm.startswith("replay:") and not Path(args.llm[7:]).is_file():
        parser.error(f"--llm {args.llm}: no such transcript file")
    url = args.llm_url or configured_endpoint()
    if args.mode != Mode.RL and args.llm == "http" and not url:
        parser.error("--llm http needs an endpoint: --llm-url or RLGPT_LLM_URL (e.g. http://127.0.0.1:8080/v1)")
    if args.mode != Mode.RL and args.llm in ("http", "auto") and url:
        try:
            validate_url(url)
        except LLMError as e:
            parser.error(str(e))
    for name in ("iterations", "total_steps", "num_envs", "max_macro_steps", "checkpoint_every", "threads"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive, not {getattr(args, name)}")
    for name, allowed in PPO_RANGES.items():  # PPO's own settings: a sentence here, not a traceback mid-run
        if (value := getattr(cfg, name)) is not None and not RANGES[allowed](value):
            parser.error(f"--{name.replace('_', '-')} must be {allowed}, not {value}")
    if args.eval_episodes < 0:
        parser.error(f"--eval-episodes must be 0 (no evaluation) or more, not {args.eval_episodes}")
    if args.track and importlib.util.find_spec("wandb") is None:
        parser.error("--track logs to Weights & Biases, which is not installed: `pip install wandb`, or leave "
                     "--track out (TensorBoard events are written either way)")
    if args.seed < 0:
        parser.error(f"--seed must be 0 or more, not {args.seed}")
    if args.num_envs % int(os.environ.get("WORLD_SIZE", 1)):
        parser.error(f"--num-envs {args.num_envs} does not split evenly over {os.environ['WORLD_SIZE']} ranks")
    skills_dir = skill_library.library_path(args.skills, args.runs_dir)
    if skills_dir is not None and args.mode == Mode.RLGPT:
        if args.run_name and (Path(args.runs_dir) / args.run_name).resolve() == skills_dir.resolve():
            parser.error(f"--run-name {args.run_name}: that is the skill library's directory; pick another")
        # checked, not created: a run stopped by a later check leaves nothing behind
        existing = next(p for p in (skills_dir, *skills_dir.parents) if p.exists())
        if not (existing.is_dir() and os.access(existing, os.W_OK)):
            parser.error(f"--skills {skills_dir}: cannot use it as the skill library directory "
                         f"({existing} is not a writable directory)")
    if args.crafter_impl not in env.CRAFTER_IMPLS:
        parser.error(f"--crafter-impl must be one of {env.CRAFTER_IMPLS}, not {args.crafter_impl!r}")
    if args.device not in ("auto", "cpu", "cuda"):
        parser.error(f"--device must be auto, cpu or cuda, not {args.device!r}")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is visible to torch")
    if not env.is_crafter(args.task):
        try:
            env.make_env(args.task).close()
        except (ImportError, ValueError) as e:  # ValueError: a task id MineDojo does not know
            parser.error(str(e))
        reference = args.llm == "reference" or (args.llm == "auto" and not url)
        if args.mode != Mode.RL and reference and args.task not in minedojo_env.TASKS:
            parser.error(f"--llm reference: hand-written skills exist only for {', '.join(minedojo_env.TASKS)}; "
                         f"{args.task} needs an LLM (--llm http) or --mode rl")
    else:
        try:
            env.get_task(args.task)
        except ValueError as e:
            parser.error(str(e))


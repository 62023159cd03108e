"""What a training run holds while train.py's loop goes: `Run`, its live handles (the run directory, the
rank, the log sinks, the LLM, the envs, the slow agent, the skill library), and `LoopState`, where the loop
is and what it remembers between iterations (the plan, the critic's feedback, each iteration's row). The
loop state is what a checkpoint keeps besides the learner and the code actions (run_dir.save), so a resumed
run goes on from the same plan, feedback and history; a run's handles are opened again on resume.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from tqdm import tqdm


@dataclass
class Run:
    """One run's live handles: run_dir.open_run makes it, train.main fills in the rest as they are opened."""

    args: Any  # train.Args, as given (or as --resume restored them)
    dir: Path  # the run directory
    task: Any = None  # core.Task of args.task, resolved once (train.main)
    rank: int = 0  # this process's rank under torchrun (0 alone writes the directory)
    world: int = 1  # the number of ranks
    writer: Any = None  # rank 0's TensorBoard SummaryWriter
    wandb: Any = None  # the wandb run (--track)
    llm: Any = None  # the agents' LLM client; None: the offline reference backend (--llm reference)
    server: Any = None  # the local llama.cpp server this run started (--llm local), stopped on close
    skill_library: Any = None  # skill_library.SkillLibrary shared across runs (rank 0, --mode rlgpt), or None
    slow: Any = None  # the slow agent (plans and critiques)
    envs: Any = None  # the vectorised training envs
    envs_started: bool = False  # reset once before the first rollout (code_actions.run_program checks it)
    checkpoint_mark: int = 0  # the last multiple of --checkpoint-every checkpointed at
    iteration: int = 0  # the iteration now running, 0-based (metrics.jsonl says it 1-based)
    llm_calls_before: int = 0  # LLM calls made before a --resume (the client counts its own)

    def waiting(self, text: str) -> None:
        """Say what the run waits for when it waits on an LLM (a call can take minutes); the reference answers
        at once."""
        if self.llm is not None:
            tqdm.write(text)


@dataclass
class LoopState:
    """Where the loop is, and what it carries from one iteration to the next. Each field is set and read
    by the step of the loop that owns it (named below); to_dict/from_dict are its checkpoint form."""

    iteration: int = 0  # iterations finished (train.main)
    phase: str = "plan"  # "plan": the agents' phase comes next; "train": it is done, RL comes next
    plan: dict | None = None  # the plan in force, as the slow agent's JSON (train.agents_phase)
    feedback: dict | None = None  # the critic's last feedback, for the next plan (iteration_record.record_feedback)
    history: list[dict] = field(default_factory=list)  # a row per finished iteration (iteration_record.py)
    curriculum: dict | None = None  # the planner's chain of sub-tasks being trained (curriculum.Curriculum)
    reused: list[str] = field(default_factory=list)  # sub-actions whose code came from the skill library
    # A change the critic made, as it was before (plan, code actions in use): set by the agents' phase, read
    # once by critic.rollback_if_worse after the next iteration
    before_change: dict | None = None
    rolled_back: bool = False  # the last change was rolled back: the next plan phase re-trains the old plan
    progress: dict | None = None  # mid-iteration counts at a checkpoint (iteration_record.IterationTally.checkpoint)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> LoopState:
        """From a checkpoint's dict; keys a checkpoint holds besides these (run_dir.save's) are the caller's."""
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})

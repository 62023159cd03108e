"""The fast agent of RL-GPT: writes one code action per "code" sub-action, in a short repair loop.

The fast loop of the paper: each candidate is (1) cut out of the model's reply, (2) checked by the
sandbox, (3) dry-run once in the task's real env (Crafter or MineDojo) for a bounded number of
steps. Any failure goes back to the model with the error and the failing line of *its* code, up to
`max_attempts` (Voyager uses 4); then `write()` returns None and the sub-action is left to RL. Bad
model code never raises here. A rewrite after the critic's note shows the model the code it changes and
what that code did in training: a stateless model can only refine code it is shown. The templates it
fills, and the checker's rules as the model reads them, are in prompts/code_writer.py.

With `llm=None` the agent is the reference backend: `skills.skill_for(name)` (for a
MineDojo task `minedojo_skills.skill_for(name)`), put through the same sandbox check and dry-run as
model code.

    python fast_agent.py --skill chop_tree     # check and dry-run one hand-written skill
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import textwrap
from dataclasses import asdict, dataclass
from pathlib import Path

from core import CodeAction, SubAction, initiation_text
from env import game_of, is_crafter, make_env
from llm import LLMError, LLMReplyError
from prompts.code_writer import (
    ANYWHERE_NOTE,
    BUDGET_NOTE,
    CODE_REPLY_TOKENS,
    CURRENT_NOTE,
    DRINK_WATER,
    EXAMPLE,
    FEEDBACK_NOTE,
    INITIATION_NOTE,
    LINE_NOTE,
    RETRY_PROMPT,
    STATS_NOTE,
    WRITE_PROMPT,
    WRITE_SYSTEM,
    code_rules,
)
from prompts.common import call_ends_text
from reference import minedojo_skills, skills
from replies import fenced_blocks
from sandbox import checker

PYTHON_FENCES = ("", "python", "python3", "py", "py3")
LINE_RE = re.compile(r"\bline (\d+)\b")


@dataclass
class Attempt:
    source: str  # the code that was tried ("" when no code came back)
    error: str | None  # why it was rejected, in words for the user; None if accepted
    line: int | None = None  # the line of `source` the error points at, when it points at one


def extract_code(text: str, name: str) -> str:
    """The model's code: the fenced block defining `name` (else the first block), else the bare text
    from its first `def` on. Models fence, chat around their code, or do neither."""
    fenced = fenced_blocks(text)
    if fenced:
        blocks = [b for info, b in fenced if info in PYTHON_FENCES] or [b for _, b in fenced]
        source = next((b for b in blocks if re.search(rf"^\s*def {re.escape(name)}\(", b, re.M)), blocks[0])
    else:
        m = re.search(r"^\s*def ", text, re.M)
        source = text[m.start():] if m else text
    return textwrap.dedent(source).strip("\n") + "\n"


def _docstring(source: str, name: str) -> str | None:
    """The entry function's own docstring, used as the code action's doc when there is one."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return ast.get_docstring(node)
    return None


class FastAgent:
    """Code writer. `llm` is an LLMClient/ReplayClient, or None for the reference backend (hand-written skills).

    The dry run uses `dry_run_steps` as the step budget of one call: pass the macro-step budget
    training will use, so code that passes here is not cut off there."""

    def __init__(self, llm=None, *, max_attempts: int = 4, dry_run_task: str = "collect_wood",
                 dry_run_seed: int = 0, dry_run_steps: int = 64, dry_run_options: dict | None = None):
        self.llm, self.max_attempts = llm, max_attempts
        self.dry_run_task, self.dry_run_seed, self.dry_run_steps = dry_run_task, dry_run_seed, dry_run_steps
        self.dry_run_options = dict(dry_run_options or {})  # make_env options of the run, e.g. crafter_impl
        self.last_attempts: list[Attempt] = []  # the last write()'s fast loop, for train.py to save

    def write(self, subaction: SubAction, env_doc: str, feedback: str | None = None,
              examples: list[CodeAction] | None = None, current: CodeAction | None = None,
              stats: dict | None = None) -> CodeAction | None:
        """A checked, dry-run code action for `subaction`, or None: leave it to RL. `examples` are the
        skill library's most related skills (skill_library.py); without any, the backend's example.
        A rewrite (the critic's `feedback` on code in use) passes that code as `current`, with its row of
        CodeStats.summary() as `stats` when it ran: a stateless model can only change code it is shown."""
        self.last_attempts = []
        if self.llm is None:
            return self._reference(subaction)
        default = DRINK_WATER if is_crafter(self.dry_run_task) else minedojo_skills.EXAMPLE.source
        prompt = WRITE_PROMPT.format(api_doc=env_doc, examples=_examples_text(examples, default),
                                     rules=code_rules(subaction.name), max_tokens=CODE_REPLY_TOKENS,
                                     name=subaction.name, spec=subaction.spec,
                                     initiation=INITIATION_NOTE.format(condition=initiation_text(subaction.initiation))
                                     if subaction.initiation else ANYWHERE_NOTE,
                                     current=_current_text(subaction.name, current, stats),
                                     feedback=FEEDBACK_NOTE.format(feedback=feedback) if feedback else "")
        messages = [{"role": "system", "content": WRITE_SYSTEM.format(game=game_of(self.dry_run_task))},
                    {"role": "user", "content": prompt}]
        for _ in range(self.max_attempts):
            try:
                reply = self.llm.chat(messages, max_tokens=CODE_REPLY_TOKENS)
            except LLMReplyError as e:  # empty or cut-off reply: the model can fix that, so it counts
                self.last_attempts.append(Attempt("", e.problem))
                messages.append({"role": "user", "content": str(e)})
                continue
            except LLMError as e:  # transport: not the model's fault; train.py decides what to do
                self.last_attempts.append(Attempt("", f"LLM transport error: {e}"))
                return None
            source = extract_code(reply.text, subaction.name)
            error, lineno = self.check_and_dry_run(source, subaction.name)
            self.last_attempts.append(Attempt(source, error, lineno))
            if error is None:
                doc = _docstring(source, subaction.name) or subaction.spec
                return CodeAction(subaction.name, source, doc)
            lines = source.splitlines()
            text = lines[lineno - 1].strip() if lineno and 0 < lineno <= len(lines) else ""
            line = LINE_NOTE.format(n=lineno, text=text) if text and text not in error else ""
            messages += [{"role": "assistant", "content": reply.text},
                         {"role": "user", "content": RETRY_PROMPT.format(error=error, line=line)}]
        return None

    def check_and_dry_run(self, source: str, entry: str) -> tuple[str | None, int | None]:
        """(error, line of the model's code) from the sandbox check, then one dry run; (None, None) if ok.

        In the dry run an exception or a spent budget is a failure; returning False is not, since the
        dry-run world need not hold the sub-action's target."""
        try:
            checker.check(source, entry)
        except checker.SandboxError as e:
            return _with_line(str(e), e.lineno), e.lineno
        env = make_env(self.dry_run_task, self.dry_run_seed, code_actions=[CodeAction(entry, source)],
                       max_macro_steps=self.dry_run_steps, **self.dry_run_options)
        try:
            env.reset(seed=self.dry_run_seed)
            info = env.step(env.n_base)[4]  # action n_base is the first (only) code action
        finally:
            env.close()
        error = info["code_error"]
        if not error:
            return None, None
        if error == "stopped: step_budget":
            error = BUDGET_NOTE.format(n=self.dry_run_steps)
        m = LINE_RE.search(error)
        return error, int(m.group(1)) if m else None

    def _reference(self, subaction: SubAction) -> CodeAction | None:
        """The hand-written skill of this name, accepted only if it passes the same checks as model code."""
        skill = (skills if is_crafter(self.dry_run_task) else minedojo_skills).skill_for(subaction.name)
        if skill is None:
            self.last_attempts.append(Attempt("", f"no hand-written skill named {subaction.name!r}"))
            return None
        error, lineno = self.check_and_dry_run(skill.source, skill.function)
        self.last_attempts.append(Attempt(skill.source, error, lineno))
        return skill if error is None else None


def _examples_text(examples: list[CodeAction] | None, default: str) -> str:
    """The prompt's examples: the skill library's related skills with their one-line doc, else the code `default`."""
    if not examples:
        return EXAMPLE.format(what="", source=default.strip("\n"))
    return "\n\n".join(EXAMPLE.format(what=f" from the skill library, {a.function}: {(a.doc or '-').splitlines()[0]}",
                                      source=a.source.strip("\n")) for a in examples)


def _current_text(name: str, current: CodeAction | None, stats: dict | None) -> str:
    """The code a rewrite changes, with what it did in training when it ran at all."""
    if current is None:
        return ""
    shown = ""
    if stats:
        errors = "; ".join(f"{msg!r} x{n}" for msg, n in stats.get("errors", [])) or "none"
        shown = STATS_NOTE.format(chosen=stats["chosen"], ok=stats["success_rate"], steps=stats["mean_steps"],
                                  ends=call_ends_text(stats.get("ends") or {}), errors=errors)
    return CURRENT_NOTE.format(name=name, version=current.name, source=current.source.strip("\n"), stats=shown)


def save_attempts(attempts: list[Attempt], folder: Path, name: str) -> None:
    """Every attempt of one fast loop, kept with the run: `<name>_<n>.py` holds the code tried and
    `attempts.jsonl` one row each (file, accepted, error, line), so a rejection can be read later."""
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "attempts.jsonl"
    before = sum(json.loads(line)["subaction"] == name for line in log.open()) if log.is_file() else 0
    with open(log, "a") as f:  # numbered on from earlier loops (a resumed plan phase), never over them
        for n, a in enumerate(attempts, before + 1):
            file = f"{name}_{n}.py" if a.source else None
            if file:
                (folder / file).write_text(a.source)
            row = {"subaction": name, "attempt": n, "file": file, "accepted": a.error is None,
                   **{k: v for k, v in asdict(a).items() if k != "source"}}
            f.write(json.dumps(row) + "\n")


def _with_line(message: str, lineno: int | None) -> str:
    """Sandbox messages in the same "line N: ..." form as run-time errors."""
    return message if lineno is None or LINE_RE.search(message) else f"line {lineno}: {message}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skill", default="chop_tree")
    args = parser.parse_args(argv)
    agent = FastAgent(None)
    action = agent.write(SubAction(args.skill, "code", ""), "")
    print(f"[hand-written skill] {args.skill}: {'accepted' if action else 'rejected'}; "
          f"error: {agent.last_attempts[-1].error or 'none'}")
    return 0 if action else 1


if __name__ == "__main__":
    raise SystemExit(main())

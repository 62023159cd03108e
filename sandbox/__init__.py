"""The sandbox for LLM-written code actions: untrusted source text is checked, compiled with guards, and run
only in a worker process under time, iteration, depth and memory budgets.

A code action is source text defining one entry function `def <entry>(api):` (plus small helper
functions) that drives the environment through the primitive API and returns True on success. It passes
three layers: an AST allowlist and a compile (checker.check), a rewrite that compiles size guards and
budget checks into it (checker.compile_action, rewrite.rewrite, guards), and a worker process per env
whose checks hold it to its budgets, driven by the trainer, which kills and replaces the worker when a
single C call overruns the budget or the worker dies: what the checks cannot see cannot reach the trainer.
Compiled-in checks, not a line tracer: a trace call on every line halved the speed of training with code
actions; a check per iteration or call costs a few percent (bench/code_sps.py).

    checker.check(source, "chop_tree")               # raises checker.SandboxError(message, lineno)
    worker = host.Worker()                            # one per env; the process starts on first use
    result = worker.run(source, "chop_tree", api)    # a limits.RunResult; never raises for the code's doing
    jobs = [w.start(source, "chop_tree", a) for w, a in pairs]; host.serve(jobs)   # several envs' at once

The files, in the order a code action meets them:
    limits.py   the budgets, the stops (Interrupt) that end a run when one is spent, RunResult
    checker.py  check: the syntax allowlist; compile_action: checked, guarded, compiled (in the worker)
    rewrite.py  the AST rewrite compile_action applies: size guards, a budget check per iteration and call
    guards.py   what the compiled code runs with: the size-checked operations and restricted builtins
    host.py     the trainer's side: Worker, one process per env, killed on overrun or crash; serve, which
                answers several workers' api calls at once
    worker.py   the worker process (`python -m sandbox.worker`): budgets, the api stub, the serve loop
"""

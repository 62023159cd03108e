"""What the models are shown: every template the LLMs read and the reply schemas beside them, one module per
reader. Only words live here (of the project they import just the sandbox's modules, whose tables the code
rules quote), so every module can use them and the agents fill them with the task and the run's numbers:

    common.py       CALL_RULES (in every API doc: core.api_doc), CALL_ENDS (how a call ended, as the critic and
                    the code writer read it) and the repair notes (llm.py's, REPAIR_PROMPT)
    planner.py      the planner's templates, PLAN_SCHEMA and plan_schema
    critic.py       the critic's templates, FEEDBACK_SCHEMA and feedback_schema
    code_writer.py  the code writer's templates, its default example, CODE_REPLY_TOKENS and code_rules

`python train.py --task T --show-prompt` (show_prompt.py) prints the first message of each that task T's
--mode sends, exactly as a run sends it (first saying so where these settings send none: the reference
backend, --mode rl); a run keeps every message it sent, with the reply, in llm_transcript.jsonl.

The planner: slow_agent.SlowAgent.plan
    system PLAN_SYSTEM and user PLAN_PROMPT, filled by slow_agent.plan_messages, which includes:
    - the task, its description, its success test in words (core.success_in_words of Task.success) and
      prerequisite chain, its base actions, inventory items (the shaping
      menu), milestones and view cells (an initiation's "in_view"): the Task record (envs/crafter_tasks.py,
      envs/minedojo_env.py, found by env.get_task);
    - the API doc: core.api_doc(env.api_for(task), --max-macro-steps), from the API class's docstrings
      (crafter_api.CrafterAPI, minedojo_env.MineDojoAPI), its recipes (Crafter: crafter_tasks.recipe_table,
      from Crafter's data.yaml; MineDojo: minedojo_env.RECIPE_TABLE) and common.CALL_RULES;
    - "subtasks": slow_agent._subtasks_rule picks SUBTASKS_LONG (a chain of plans.LONG_CHAIN or more),
      SUBTASKS_BENCHMARK (both followed by CURRICULUM, from curriculum.py's THRESHOLD, WINDOW and
      MIN_EPISODES and crafter_env.SUBTASK_REWARD), SUBTASKS_TEST (a long chain towards a test that is not
      one achievement), SUBTASKS_SHORT or SUBTASKS_MINEDOJO;
    - "initiation": INITIATION_VIEW (a game with a view) or INITIATION_INVENTORY, its schema INITIATION_SCHEMA
      or INITIATION_SCHEMA_NO_VIEW (the critic's "initiations" too), and the examples of conditions and of an
      observable success test, EXAMPLES_VIEW or EXAMPLES_INVENTORY and OBSERVABLE_VIEW or OBSERVABLE_INVENTORY;
      the number of sub-actions and the shaping bounds: core.MAX_SUBACTIONS, core.SHAPING_RANGE;
    - LIBRARY_NOTE, with a skill library: its lines (skill_library.SkillLibrary.catalogue, set by train.py);
    - REPLAN_PROMPT, from iteration 2 on: the previous plan with the critic's moves applied, as
      slow_agent._plan_text shows it (MOVED_NOTE for a moved sub-action), and the critic's Feedback as JSON.
    Reply schema: PLAN_SCHEMA, by plan_schema ("reuse" only with a skill library, an initiation's view
    tests only where the game's API has a view).

The code writer: fast_agent.FastAgent.write
    system WRITE_SYSTEM and user WRITE_PROMPT, filled in FastAgent.write, which includes:
    - the API doc, as the planner's;
    - examples (EXAMPLE each, by fast_agent._examples_text): the skill library's related skills
      (skill_library.SkillLibrary.related, chosen by train.py), else DRINK_WATER on Crafter or
      minedojo_skills.EXAMPLE on MineDojo;
    - the code rules: code_rules, built from the sandbox checker's own tables (sandbox/), in its words;
    - the reply cap CODE_REPLY_TOKENS (from sandbox.limits.MAX_SOURCE_CHARS), also the call's max_tokens;
    - the sub-action's name and spec, from the plan, and where it is called: INITIATION_NOTE with its
      initiation in words (core.initiation_text), else ANYWHERE_NOTE;
    - for a rewrite (fast_agent._current_text): CURRENT_NOTE with the code in use and STATS_NOTE with its
      row of code_actions.CodeStats.summary (how its calls ended: common.call_ends_text); FEEDBACK_NOTE with
      the critic's fix.
    No reply schema: the code is cut out of a fence (fast_agent.extract_code).

The critic: slow_agent.SlowAgent.critique
    system CRITIC_SYSTEM and user CRITIC_PROMPT, filled by slow_agent.critic_messages, which includes:
    - the mode's parts: with RL (rlgpt, rl+config) PLAN_TITLE, CODE_TITLE, NUMBERS_RL, SUCCESS_RL, EVAL_RL,
      UPDATE_RL and the moves MOVE_TO_CODE, MOVE_FIXES, MOVE_INITIATIONS (with INITIATION_VIEW/_INVENTORY),
      MOVE_RL_CONFIG; under --mode code CRITIC_SYSTEM_CODE and the *_CODE parts, and MOVE_FIXES alone;
    - the task, its description and its success test in words, as the planner's;
    - the trained plan, as slow_agent._plan_text shows it (each initiation in words);
    - the iteration's statistics (evidence.critic_stats, kept in iter_k/stats.json), in critic.py's
      wording of numbers (num, success_text): STATS_GOAL, or STATS_GAME with SCORE on `crafter`;
      REWARD_TASK or REWARD_GAME;
    - one line per code sub-action (CODE_ACTION_LINE, CODE_ROUTINE_LINE under --mode code, ORIGIN,
      NOT_WRITTEN_LINE, LEFT_TO_RL_LINE), the code serving it found by critic.active_code, with how its calls
      ended (common.CALL_ENDS, call_ends_text); under follow_order, ORDER_LINE (stats' "order": how often the
      RL agent chose the code action the order named, counted in ppo.py);
    - VARIANTS_MENU, where hand-written code is allowed: skills.variants of each code action, described by
      their docstrings; FRAMES_NOTE, with --vision, for the attached frames.
    Reply schema: FEEDBACK_SCHEMA, by feedback_schema ("variants" only where offered, the RL moves only
    where RL runs, an initiation's view tests only where the game's API has a view).

Repairs
    - A structured reply (planner, critic) that is unusable is refused by llm.LLMClient with common.NOT_JSON,
      SCHEMA_MISMATCH, CUT_OFF or NO_CHOICES; one on the schema that is no valid plan or feedback, by the
      ValueError of its check (Plan.from_dict, the parse in SlowAgent.plan, critic.check_feedback), which
      words its own error. slow_agent.SlowAgent._ask sends either back inside common.REPAIR_PROMPT.
    - An endpoint that takes no response_format gets the schema in the prompt: common.JSON_INSTRUCTION,
      appended by llm.LLMClient._payload.
    - The code writer gets llm's CUT_OFF or NO_CHOICES as it is, and after a failed check or dry run
      RETRY_PROMPT (with LINE_NOTE, the failing line), filled in FastAgent.write; the error is
      sandbox.checker.check's or the dry run's (BUDGET_NOTE for a spent step budget, in
      FastAgent.check_and_dry_run).
"""

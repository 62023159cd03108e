"""The hand-written reference skills, plans and critic: the offline stand-in for the LLM (`--llm reference`).

Skills, plans and whole-task programs written by hand by the project's engineers, never by a model and
always labelled so, so that RL-GPT's whole method runs with no LLM endpoint, and LLM-written code has a
yardstick. Code actions travel as source text: each skill's and program's source is a string here, which
goes through the same sandbox check and dry run as an LLM's.

    skills.py           Crafter's reference skills (code actions), what each does and where it can start,
                        and their variants for the critic
    skill_helpers.py    the helper functions pasted into the skills that call them
    plans.py            Crafter's reference plans, in the slow agent's JSON shape
    whole_task.py       `--mode code`'s whole-task programs, built from the skills
    crafter_program.py  the whole-benchmark program (`--mode code --task crafter`): its top and staying alive
    crafter_progress.py the rest of that program: crafting, collecting, exploring
    crafter_parts.py    that program taken apart: its behaviours as the crafter plan's code actions
    minedojo_skills.py  MineDojo's reference skills, plans and whole-task programs
    critic_rules.py     the critic of the slow loop as hand-written rules over its statistics
"""

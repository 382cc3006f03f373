"""The reasoning strategies, one folder each, every folder the same shape:

- ``__init__.py``: what the strategy exports;
- ``strategy.py``: the :class:`~pyql.agent.strategy.Strategy` subclass, its options and its run;
- ``prompts.py``: the prompt texts it renders and how it reads the replies back;
- what else is the strategy's own (QueryAgent's paper presets and request format, SRP's
  references and pruning, Readi's path kinds).

``baselines/`` holds the small strategies the papers compare against (vanilla generation, the
self-correction baselines, AgentBench's setting), one module each. Their stand-ins (``--llm gold``,
``--llm noisy-gold``) belong to the evaluation (:mod:`pyql.agent.evaluation.standins`): a
strategy never knows whether a model or a stand-in answers it.

Adding a strategy: ``docs/architecture.md``, "Add a strategy".
"""

"""SRP — Self-Reflective Planning (reference search, relation check, path planning, knowledge
retrieval along the path, judge and edit, chain-of-thought answer) over a pyql KB.

- :mod:`pyql.agent.srp.labelled`: solved questions with their gold relation paths;
- :mod:`pyql.agent.srp.references`: the reference base (build, save, open, retrieve);
- :mod:`pyql.agent.srp.prompts`: the paper's prompts and the parsers of their replies.
"""

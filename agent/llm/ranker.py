"""The no-model baseline (``--llm ranker``): an LLM that only chooses, by the environment's prior.

Issue 37 measured that a word-overlap rule between the question and a relation's name, with no
model at all, picks the right relation at a KB node more often than SmolLM2 does. This module
makes that rule an :class:`~pyql.agent.llm.clients.LLM` that scores candidates (choose mode), so the
baseline goes through exactly the code path the model does and the two are comparable in one
table: the strategy builds the same candidates, asks ``score(messages, candidates)``, and picks
the best.

**The rule** (:func:`overlap_prior`). Both texts are split into words (on anything that is not
a letter or digit, and on camelCase: ``film.film.directed_by`` is ``film film directed by``),
lower-cased; words in :data:`STOPWORDS` are dropped; each word is cut to its first
:data:`PREFIX` (4) letters, so ``directed``/``director`` and ``release``/``released`` meet. A
candidate scores the number of its distinct prefixes found among the question's, minus
:data:`UNMATCHED_PENALTY` (0.001) for each of its prefixes that is not: among equal overlaps the
name with fewer unexplained words wins; a remaining tie goes to the earlier candidate (the
relation ranker's order) in :meth:`~pyql.agent.llm.clients.Scores.best`.

**The linked mentions do not count** (``mentions``: the item's linked entity mentions, e.g.
MetaQA's ``[Heat]``): their words are taken out of the question before its prefixes are cut.
A mention names the node that every call on it carries — ``add_fact(1900, in_language, ?x)``,
``add_fact(1900, directed_by, ?x)`` — so it says nothing about which relation or which step
to take; counted, it made every fact on the topic entity outscore ``set_answer(?x)`` and
``execute()`` (neither has a word of the question), so on QueryAgent the baseline added facts
until the step cap and never answered (0 of 3 MetaQA 1-hop questions, ``max_steps`` each, in
the issue 37 measurement), and a mention's words could collide with a relation's ("which movie
did [Murray Langston] write": ``lang`` tied ``in_language`` with ``written_by``). Without
mentions the question counts whole.

>>> overlap_prior("what genre is [Heat]", "has_genre")
1.0
>>> llm = RankerLLM("who directed [Heat]")
>>> scores = llm.score([], ["has_genre", "directed_by", "starred_actors"])
>>> scores.best(), [round(s, 3) for s in scores]
(1, [-0.001, 1.0, -0.002])

The question is the evaluation item's (:class:`RankerLLM` is made per question by the
``ranker`` provider, :func:`pyql.agent.evaluation.specs.build_provider`) — never its gold
answers or gold program — and the messages are not read: the prompt of a step holds
observations that list the candidates themselves. It writes nothing: :meth:`RankerLLM.complete`
raises :class:`~pyql.agent.errors.GenerationUnsupportedError`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pyql.agent.errors import GenerationUnsupportedError
from pyql.agent.llm.accounting import TokenUsage
from pyql.agent.llm.clients import LLMReply, Message, Scores, Stop, Tools

__all__ = ["PREFIX", "STOPWORDS", "UNMATCHED_PENALTY", "RankerLLM", "overlap_prior",
           "overlap_priors", "prefixes", "question_words"]

#: the letters of a word that count (``directed``/``director`` -> ``dire``)
PREFIX = 4
#: what a candidate loses per prefix of its own the question does not have
UNMATCHED_PENALTY = 0.001
#: words that carry no relation: question words, auxiliaries, articles, prepositions
STOPWORDS = frozenset("""
a an the of by in on at to for from with as and or is are was were be been being has have had
do does did what which who whom whose when where why how that this these those it its
""".split())

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SPLIT = re.compile(r"[^0-9A-Za-z]+")


def prefixes(text: str) -> set[str]:
    """The distinct 4-letter word prefixes of ``text``, stopwords left out.

    >>> sorted(prefixes("people.person.placeOfBirth"))
    ['birt', 'peop', 'pers', 'plac']
    """
    out = set()
    for word in _SPLIT.split(_CAMEL.sub(" ", text)):
        word = word.lower()
        if word and word not in STOPWORDS:
            out.add(word[:PREFIX])
    return out


def question_words(question: str, mentions: Sequence[str] = ()) -> str:
    """``question`` without its linked ``mentions`` (each occurrence, longest first, with the
    brackets around it if any): the words the rule counts.

    >>> question_words("which movie did [Murray Langston] write", ["Murray Langston"])
    'which movie did   write'
    """
    for mention in sorted(set(mentions), key=len, reverse=True):
        question = question.replace(f"[{mention}]", " ").replace(mention, " ")
    return question


def overlap_prior(question: str | set[str], candidate: str) -> float:
    """The candidate's prefixes found in the question, less :data:`UNMATCHED_PENALTY` for each
    that is not (``question``: its text, or its :func:`prefixes`)."""
    asked = prefixes(question) if isinstance(question, str) else question
    own = prefixes(candidate)
    matched = len(own & asked)
    return matched - UNMATCHED_PENALTY * (len(own) - matched)


def overlap_priors(question: str, candidates: Sequence[str], mentions: Sequence[str] = ()
                   ) -> list[float]:
    """:func:`overlap_prior` of each candidate, the linked ``mentions``' words left out of the
    question: the baseline's scores, as choose mode's prior (``prior_weight``).

    >>> overlap_priors("what genres are the films directed by [Heat]",
    ...                ["Heat -> directed_by", "Heat -> directed_by -> has_genre"], ["Heat"])
    [0.999, 1.999]
    """
    asked = prefixes(question_words(question, mentions))
    return [overlap_prior(asked, c) for c in candidates]


class RankerLLM:
    """The ``ranker`` baseline of one question: :meth:`score` is :func:`overlap_prior` of the
    question and each candidate; :meth:`complete` raises
    :class:`~pyql.agent.errors.GenerationUnsupportedError` (this baseline only chooses). It
    reads no prompt and uses no tokens (its scoring calls count, with 0 tokens)."""

    #: it scores (choose mode) ...
    scores_candidates = True
    #: ... and writes nothing, so it takes no schema
    structured_output = False

    def __init__(self, question: str, *, mentions: Sequence[str] = (),
                 model: str = "ranker") -> None:
        self.question = question
        self.mentions = tuple(m for m in mentions if m)
        self.model = model
        self._asked = prefixes(question_words(question, self.mentions))

    def __repr__(self) -> str:
        return f"RankerLLM({self.question!r})"

    def score(self, messages: Sequence[Message], candidates: Sequence[str], *,
              max_tokens: int | None = None) -> Scores:
        """:func:`overlap_prior` of the question and each candidate (``messages`` and
        ``max_tokens`` are not used: the rule reads no prompt and writes no token)."""
        values = [overlap_prior(self._asked, c) for c in candidates]
        return Scores(values, usage=TokenUsage(), model=self.model, cost=0.0)

    def complete(self, messages: Sequence[Message], *, stop: Stop = None, tools: Tools = None,
                 response_format: Mapping[str, Any] | None = None,
                 max_tokens: int | None = None, temperature: float | None = None) -> LLMReply:
        raise GenerationUnsupportedError(
            "the ranker baseline only chooses among candidates (--choose on); it writes no "
            "reply", model=self.model,
            reason="a no-model baseline: it scores candidates by word overlap with the "
                   "question and cannot generate")

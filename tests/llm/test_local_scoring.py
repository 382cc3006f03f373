"""The real model scores candidates (choose mode, issue 37): SmolLM2-135M in llama.cpp's server,
in-process. Each candidate's score is its exact log-likelihood as the whole reply (the forced
tokens' log-probabilities and the end of generation), the prompt prefix comes from the slot's
cache, the accounting is the server's own, and the model's greedy reply is its likeliest
candidate. Kept short: a handful of candidates, two prompts."""

from __future__ import annotations

import math

import pytest

from pyql.agent.llm.accounting import PriceTable, TokenCounter
from pyql.agent.llm.clients import Scores
from pyql.agent.llm.local import LocalChat, LocalServer
from pyql.agent.recorder import Recorder

pytestmark = pytest.mark.llm

RELATIONS = ["has_genre", "directed_by", "starred_actors", "release_year"]
CHOOSE = [
    {"role": "system", "content": "Answer with one relation name from the list, nothing else."},
    {"role": "user", "content": "Question: what genre is the movie [Heat]?\nRelations: "
                                + ", ".join(RELATIONS)},
]


@pytest.fixture(scope="module")
def llm(server: LocalServer) -> LocalChat:
    return LocalChat(server, max_tokens=24)


def _server_tokens(server: LocalServer) -> tuple[float, float, float]:
    m = server.metrics()
    return (m["llamacpp:prompt_tokens_total"], m["llamacpp:prompt_tokens_cached_total"],
            m["llamacpp:tokens_predicted_total"])


def test_scores_are_finite_stable_and_accounted_as_the_server_counts(
        server: LocalServer, llm: LocalChat) -> None:
    assert llm.scores_candidates
    before = _server_tokens(server)
    first = llm.score(CHOOSE, RELATIONS)
    after = _server_tokens(server)
    assert isinstance(first, Scores) and len(first) == len(RELATIONS)
    assert all(math.isfinite(v) and v < 0 for v in first)
    # one request per candidate; k tokens forced + the end of generation decoded for each
    assert first.requests == len(RELATIONS)
    assert first.usage is not None
    assert first.usage.completion_tokens == sum(first.tokens) + len(RELATIONS)
    # the server's own counters agree: processed + cached prompt tokens, decoded tokens
    processed, cached, decoded = (a - b for a, b in zip(after, before))
    assert first.usage.prompt_tokens == processed + cached
    assert first.usage.cached_tokens == cached
    assert first.usage.completion_tokens == decoded
    # the shared prefix is served from the cache: after the first candidate, all but a token
    prompt = first.usage.prompt_tokens // len(RELATIONS)
    assert first.usage.cached_tokens >= (len(RELATIONS) - 1) * (prompt - 1)

    # greedy and exact: the same scores again (all of the prompt from the cache now), and the
    # same likeliest candidate
    again = llm.score(CHOOSE, RELATIONS)
    assert list(again) == pytest.approx(list(first), abs=1e-4)
    assert again.best() == first.best()
    # the order of the candidates does not change a candidate's score
    reordered = llm.score(CHOOSE, list(reversed(RELATIONS)))
    assert list(reversed(reordered)) == pytest.approx(list(first), abs=1e-4)


def test_scoring_agrees_with_the_models_greedy_decoding(server: LocalServer,
                                                        llm: LocalChat) -> None:
    """The model decodes its greedy reply to a prompt (llama.cpp's ``/completion``, reporting
    each token's log-probability and the end of generation); scoring that reply gives exactly the
    sum of those log-probabilities, and every continuation of the reply in place of its end
    scores lower (at the end, greedy decoding chose the end of generation over anything else)."""
    import httpx2

    prompt = [{"role": "user", "content": "Say hello."}]
    headers = {"Authorization": f"Bearer {server.api_key}"}
    templated = httpx2.post(f"{server.root}/apply-template", json={"messages": prompt},
                            headers=headers, timeout=60).json()["prompt"]
    decoded = httpx2.post(f"{server.root}/completion", headers=headers, timeout=300, json={
        "prompt": templated, "n_predict": 48, "temperature": 0.0, "n_probs": 1,
        "post_sampling_probs": False}).json()
    assert decoded["stop_type"] == "eos"  # a whole reply, ended by the model
    greedy = decoded["content"]
    steps = decoded["completion_probabilities"]
    # greedy: every token was the likeliest one
    assert all(p["id"] == p["top_logprobs"][0]["id"] for p in steps)
    scores = llm.score(prompt, [greedy, greedy + " Goodbye.", greedy + "!", greedy + "\n\nBye"])
    assert scores[0] == pytest.approx(math.fsum(p["logprob"] for p in steps), abs=1e-3)
    assert scores.tokens[0] + 1 == len(steps)
    assert scores.best() == 0 and all(v < scores[0] for v in scores[1:])


def test_a_candidate_over_the_token_cap_scores_minus_infinity(llm: LocalChat) -> None:
    scores = llm.score(CHOOSE, ["has_genre", "starred_actors " * 10], max_tokens=8)
    assert math.isfinite(scores[0]) and scores[1] == -math.inf
    assert scores.requests == 1  # the long one was not sent


def test_the_recorder_counts_a_scoring_call_with_the_servers_tokens(llm: LocalChat) -> None:
    rec = Recorder(llm, "what genre is [Heat]", counter=TokenCounter(),
                   price_table=PriceTable())
    scored = rec.score(CHOOSE, RELATIONS)
    usage = rec.usage
    assert (usage.llm_calls, usage.scoring_calls) == (1, 1)
    assert usage.prompt_tokens == scored.tokens.prompt_tokens > 0
    assert usage.cached_tokens == scored.tokens.cached_tokens > 0
    assert not usage.estimated_tokens and usage.cost == 0.0
    assert scored.step_fields()["data"]["scored"]["candidates"] == RELATIONS

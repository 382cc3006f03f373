"""pyql.agent: the QueryAgent (ReAct over a pyql Session), LLM clients, accounting, relation
ranking, prompts and trajectories.

``openai`` and ``tiktoken`` (extra ``agent``) are imported only when a client or a token counter
needs them; sentence-transformers (extra ``embed``) only by the local embedding ranker.

>>> from pyql.agent import QueryAgent, ScriptedLLM, OpenAIChat  # doctest: +SKIP
>>> agent = QueryAgent(OpenAIChat("gpt-4o-mini"), kb, guidelines=True)  # doctest: +SKIP
>>> agent.run("who directed [Kismet]", {"Kismet": "Kismet"}).answers  # doctest: +SKIP
"""

from pyql.agent import errors
from pyql.agent.errors import *  # noqa: F403 - every LLM error is part of the API
from pyql.agent.grounding.ranking import (
    BM25Ranker,
    EmbeddingCache,
    EmbeddingRanker,
    RelationRanker,
    SentenceTransformerEmbedder,
    rank_relations,
)
from pyql.agent.llm.accounting import (
    DEFAULT_PRICES,
    Price,
    PriceTable,
    TokenCounter,
    TokenUsage,
    Usage,
    get_encoding,
    load_encoding,
)
from pyql.agent.llm.clients import (
    LLM,
    LLMReply,
    OpenAIChat,
    OpenAIEmbeddings,
    ReplayLLM,
    ScriptedLLM,
    ToolCall,
)
from pyql.agent.strategies.queryagent.prompts import (
    RETRY_WORDING,
    PromptProfile,
    get_prompt_profile,
    render_hint,
    system_prompt,
    tools_doc,
)
from pyql.agent.strategies.queryagent.strategy import QueryAgent, SessionFactory
from pyql.agent.strategy import (
    Result,
    Strategy,
    StrategyConfig,
    UnknownStrategyError,
    available_strategies,
    build_strategy,
    get_strategy,
)
from pyql.agent.trajectory import Step, Trajectory, load_trajectories
from pyql.schemas import tool_schemas

__all__ = [
    "QueryAgent",
    "Result",
    "SessionFactory",
    "Strategy",
    "StrategyConfig",
    "UnknownStrategyError",
    "available_strategies",
    "build_strategy",
    "get_strategy",
    "LLM",
    "LLMReply",
    "ToolCall",
    "OpenAIChat",
    "OpenAIEmbeddings",
    "ScriptedLLM",
    "ReplayLLM",
    *errors.__all__,
    "Usage",
    "TokenUsage",
    "TokenCounter",
    "Price",
    "PriceTable",
    "DEFAULT_PRICES",
    "load_encoding",
    "get_encoding",
    "RelationRanker",
    "BM25Ranker",
    "EmbeddingRanker",
    "EmbeddingCache",
    "SentenceTransformerEmbedder",
    "rank_relations",
    "PromptProfile",
    "get_prompt_profile",
    "system_prompt",
    "tools_doc",
    "tool_schemas",
    "render_hint",
    "RETRY_WORDING",
    "Step",
    "Trajectory",
    "load_trajectories",
]

"""The baselines the papers compare against, one module each: ``vanilla`` (one-call generation
of the whole query, zero- and few-shot), ``self_correction`` (QueryAgent's Table 3
self-correction baselines) and ``agentbench`` (Table 6: AgentBench's setting, a QueryAgent
configuration)."""

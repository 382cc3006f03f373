"""The model room: LLM clients and what is sent to and counted of them.

==================  ===========================================================================
module              its one job
==================  ===========================================================================
``clients``         the :class:`LLM` protocol and its clients: OpenAI-compatible chat
                    (any server: OpenAI, vLLM, Ollama, llama.cpp), embeddings, the scripted
                    client of tests, and the recorded-replay client
``local``           llama.cpp's server in this process (``--llm local``: a GGUF model, no network)
``structured``      reply formats: the JSON schema a strategy's step sends (constrained decoding)
                    and how the reply is read back
``accounting``      tokens, cached tokens, prices and latency of every call
==================  ===========================================================================

The public names are re-exported by :mod:`pyql.agent`; import the modules above for the rest.
"""

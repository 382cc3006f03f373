"""The KB-side helpers that every strategy shares: what the environment offers a model.

==================  ===========================================================================
module              its one job
==================  ===========================================================================
``linking``         entity linking from KB labels (mentions -> KB ids)
``ranking``         relation ranking (BM25, embeddings) against the question
``paths``           the one path core of Readi and SRP: a path type, binding to the KB,
                    instantiation into a PyQL program
==================  ===========================================================================
"""

"""surrealdocs in other frameworks: retrievers for LangChain and LlamaIndex.

Each lives in its own module and needs its extra:

- :mod:`surrealdocs.integrations.langchain`: ``pip install 'surrealdocs[langchain]'``
- :mod:`surrealdocs.integrations.llamaindex`: ``pip install 'surrealdocs[llamaindex]'``

Both are thin faces over :meth:`surrealdocs.KnowledgeBase.search` and share
:mod:`surrealdocs.integrations.common` (the search options, a hit's citation metadata, and
running the knowledge base's calls on the event loop it lives on).
"""

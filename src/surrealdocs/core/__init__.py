"""The core: what surrealdocs does (ingest, sync, search, notebooks, jobs, keys, evaluation,
re-embedding), behind :class:`~surrealdocs.core.kb.KnowledgeBase`. Every face calls it."""

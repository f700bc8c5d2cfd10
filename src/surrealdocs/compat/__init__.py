"""Drop-in faces of other libraries' APIs, built on surrealdocs' core.

- :mod:`surrealdocs.compat.kreuzberg`: kreuzberg-surrealdb's ``DocumentConnector`` and
  ``DocumentPipeline`` (also importable as :mod:`surrealdocs.kreuzberg_surrealdb`).
"""

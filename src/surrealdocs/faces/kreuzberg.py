"""The facade's module path until 2026-12: :mod:`surrealdocs.faces.kreuzberg_surrealdb` (the
facade of kreuzberg-surrealdb's API; "kreuzberg" alone names the extractor,
:mod:`surrealdocs.parts.extract`)."""

from .kreuzberg_surrealdb import *  # noqa: F403
from .kreuzberg_surrealdb import __all__  # noqa: F401

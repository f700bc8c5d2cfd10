"""Table, index and metadata-record names of one surrealdocs schema.

The defaults are ``documents`` and ``chunks``; other names let several knowledge bases (or the
kreuzberg-surrealdb facade's own tables) live in one database. Every name is validated before
it is placed in SurrealQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from surrealdb import RecordID

from ..config import NO_STEMMING, SNOWBALL_LANGUAGES
from ..errors import InvalidIdentifierError

META = "surrealdocs_meta"
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}\Z")


def validate_identifier(name: str, what: str = "identifier") -> str:
    """Return ``name`` if it is safe to place in SurrealQL as a table/index name, else raise."""
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise InvalidIdentifierError(
            f"invalid {what} {name!r}: use letters, digits and underscores, "
            "starting with a letter or underscore (at most 64 characters)"
        )
    return name


@dataclass(frozen=True)
class Names:
    documents: str = "documents"
    chunks: str = "chunks"
    language: str = "english"  # of the full-text analyzer, which is named after it

    def __post_init__(self) -> None:
        if self.language not in (*SNOWBALL_LANGUAGES, NO_STEMMING):
            raise InvalidIdentifierError(
                f"invalid analyzer language {self.language!r}: use one of "
                f"{', '.join(SNOWBALL_LANGUAGES)} or {NO_STEMMING}")
        validate_identifier(self.documents, "documents table name")
        validate_identifier(self.chunks, "chunks table name")
        if self.documents == self.chunks:
            raise InvalidIdentifierError("the documents and chunks tables must differ")
        if META in (self.documents, self.chunks):
            raise InvalidIdentifierError(f"{META} is reserved")

    @property
    def default(self) -> bool:
        return (self.documents, self.chunks) == ("documents", "chunks")

    @property
    def files(self) -> str:
        return "files" if self.default else f"{self.documents}_files"

    @property
    def analyzer(self) -> str:
        return f"sd_{self.language}"

    @property
    def analyzer_filters(self) -> str:
        stem = "" if self.language == NO_STEMMING else f",snowball({self.language})"
        return f"lowercase,ascii{stem}"

    @property
    def ft_index(self) -> str:
        return f"{self.chunks}_content_ft"

    @property
    def documents_ft_index(self) -> str:
        """The full-text index on the documents' content (documents-only stores)."""
        return f"{self.documents}_content_ft"

    @property
    def facets(self) -> str:
        """A row per filterable metadata value of a document (key, value), indexed so a
        metadata filter finds its documents without reading them."""
        return validate_identifier(f"{self.documents}_facets", "facets table name")

    @property
    def vectors(self) -> str:
        """The table of the chunks' vectors (id mirrors the chunk's) with the shared HNSW
        index, apart from the chunks so that BM25 never reads a vector."""
        return validate_identifier(f"{self.chunks}_vectors", "vector table name")

    @property
    def hnsw_index(self) -> str:
        return f"{self.chunks}_embedding_hnsw"

    def _scoped(self, table: str) -> str:
        return table if self.default else f"{self.documents}_{table}"

    @property
    def notebook(self) -> str:
        return self._scoped("notebook")

    @property
    def reference(self) -> str:
        """Edge table: document (source) -> reference -> notebook."""
        return self._scoped("reference")

    @property
    def note(self) -> str:
        return self._scoped("note")

    @property
    def artifact(self) -> str:
        """Edge table: note -> artifact -> notebook."""
        return self._scoped("artifact")

    @property
    def job(self) -> str:
        return self._scoped("job")

    @property
    def chat_session(self) -> str:
        """A conversation with the knowledge base (a notebook's, or the whole store's)."""
        return self._scoped("chat_session")

    @property
    def chat_turn(self) -> str:
        """One question and its answer in a conversation, with its citations."""
        return self._scoped("chat_turn")

    def notebook_vectors(self, notebook: RecordID) -> str:
        """The table holding a copy of the vectors of one notebook's chunks, with an HNSW
        index of its own, so a scoped vector search walks a graph of that notebook only."""
        return validate_identifier(f"{self.chunks}_nbv_{notebook.id!s}",
                                   "notebook vector table name")

    def _key(self, kind: str) -> RecordID:
        return RecordID(META, kind if self.default else f"{self.documents}.{self.chunks}.{kind}")

    @property
    def schema_key(self) -> RecordID:
        return self._key("schema")

    @property
    def embedding_key(self) -> RecordID:
        return self._key("embedding")

    @property
    def index_state_key(self) -> RecordID:
        """Pending-vector counter of the shared HNSW index."""
        return self._key("index_state")

    @property
    def import_key(self) -> RecordID:
        """An import in progress: the archive it carries (an import run again resumes)."""
        return self._key("import")

    def index_state_key_of(self, table: str) -> RecordID:
        """Pending-vector counter of the HNSW index of another table (a notebook's)."""
        return self._key(f"index_state.{validate_identifier(table)}")

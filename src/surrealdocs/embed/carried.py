"""The model of vectors that came from elsewhere (an imported archive): its name, dimension
and provenance, without its weights. A store is bound to it as to the model itself; asking
it to embed is refused (an import embeds nothing)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..errors import ModelUnavailableError
from .vectors import Vectors


class CarriedModel:
    """An :class:`~surrealdocs.embed.base.Embedder` that only names a model."""

    def __init__(self, name: str, dimension: int,
                 provenance: Mapping[str, str] | None = None) -> None:
        self.name = name
        self.dimension = int(dimension)
        self.provenance = dict(provenance or {})

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        raise ModelUnavailableError(
            f"the vectors of this store come from {self.name!r}, which is not loaded here: "
            f"open the store with --model {self.name}")

    def embed_query(self, text: str) -> Vectors:
        return self.embed_documents([text])

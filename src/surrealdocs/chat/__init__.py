"""Chat models for answers (``kb.ask``): any OpenAI-compatible chat-completions server
(``openai:MODEL``) or Ollama's chat API (``ollama:MODEL``), streamed token by token.

A request is retried after a 429, a 5xx, a timeout or a refused connection, with
exponential backoff (or the server's ``Retry-After``), until its first token; a failure is a
:class:`~surrealdocs.errors.ChatModelError` that names the provider, endpoint and model,
never the API key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from ..config import Settings
from ..errors import ConfigurationError, ForbiddenError
from .base import HOW_TO_SET, ChatModel, ChatOptions, Malformed
from .ollama import OllamaChat
from .openai import OpenAIChat

__all__ = ["ChatModel", "ChatOptions", "Malformed", "OllamaChat", "OpenAIChat",
           "allowed_model", "chat_model", "register"]

_PROVIDERS: dict[str, type[ChatModel]] = {}


def register(cls: type[ChatModel]) -> None:
    """Make ``PROVIDER:MODEL`` (``cls.provider``) a chat model of class ``cls``."""
    _PROVIDERS[cls.provider] = cls


register(OpenAIChat)
register(OllamaChat)


def chat_model(name: str | None, settings: Settings,
               env: Mapping[str, str] | None = None) -> ChatModel:
    """The chat model ``name`` (``openai:MODEL`` / ``ollama:MODEL``; default
    ``settings.llm``), reached as the settings and environment say.

    The configured key (``llm_api_key``) goes to the configured model's server only: a
    model that resolves to another address (another provider's default) is not sent it."""
    env = os.environ if env is None else env
    name = (name or settings.llm or "").strip()
    if not name:
        raise ConfigurationError(f"no chat model to answer with: {HOW_TO_SET}")
    cls, model = _provider(name)
    base = _base_url(cls, settings, env)
    key = settings.llm_api_key
    if key and settings.llm and settings.llm.strip() != name:
        own, _ = _provider(settings.llm.strip())
        if _base_url(own, settings, env) != base:
            key = None
    if not key and cls is OpenAIChat:
        key = env.get("OPENAI_API_KEY")
    return cls(model, ChatOptions(base, key or None, settings.llm_timeout,
                                  settings.llm_retries))


def _provider(name: str) -> tuple[type[ChatModel], str]:
    provider, _, model = name.partition(":")
    if provider not in _PROVIDERS or not model.strip():
        raise ConfigurationError(f"unknown chat model {name!r}: {HOW_TO_SET}")
    return _PROVIDERS[provider], model.strip()


def _base_url(cls: type[ChatModel], settings: Settings, env: Mapping[str, str]) -> str:
    return settings.llm_base_url or env.get(cls.base_url_env) or cls.default_base_url


def allowed_model(requested: str | None, settings: Settings,
                  allowed: Sequence[str] = ()) -> str | None:
    """The chat model a client of a server may have: ``None`` (the server's own,
    ``settings.llm``) when it asks for none, else one of the models the operator allowed
    (``settings.llm`` itself and ``allowed``), named ``MODEL`` or ``PROVIDER:MODEL`` with the
    server's provider. A client never chooses a provider, a host or a key: those stay the
    operator's, and anything else is refused (:class:`ForbiddenError`)."""
    if requested is None or not requested.strip():
        return None
    own = (settings.llm or "").strip()
    provider, _, own_model = own.partition(":")
    if not own:
        raise ConfigurationError(f"no chat model to answer with: {HOW_TO_SET}")
    asked = requested.strip()
    if ":" in asked:
        asked_provider, _, asked = asked.partition(":")
        if asked_provider != provider:
            raise ForbiddenError(f"this server answers with {provider} models only: a request"
                                 " may choose a model the operator allowed, not a provider")
    permitted = {own_model.strip()} | {a.strip().removeprefix(f"{provider}:")
                                        for a in allowed if a.strip()}
    if asked.strip() not in permitted:
        raise ForbiddenError(
            f"the model {asked.strip()!r} is not one this server allows (allowed:"
            f" {', '.join(sorted(permitted))}; the operator adds more with serve --llm-allow)")
    return f"{provider}:{asked.strip()}"

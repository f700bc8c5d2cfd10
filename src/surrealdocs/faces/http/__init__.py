"""``surrealdocs serve``: an HTTP API (FastAPI) and a search page over one knowledge base.

Needs the ``serve`` extra: ``pip install 'surrealdocs[serve]'``.
"""

from .app import create_app
from .server_config import ServeConfig, is_loopback, parse_size

__all__ = ["ServeConfig", "create_app", "is_loopback", "parse_size"]

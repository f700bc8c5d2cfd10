"""The version of surrealdocs (a module of its own, so any layer may name it)."""

__version__ = "0.1.0"

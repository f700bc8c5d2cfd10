"""Faces: the ways in (the command line, the HTTP server and its page, the MCP server, the
kreuzberg-surrealdb API). Each maps its input to one core call and its output back; none
holds logic of its own."""

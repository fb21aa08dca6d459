"""The MCP server a master agent drives the fleet through (issue 21, spec 8): tools and resources over the REST API.

Every tool and resource is one REST call made with the caller's own bearer token (`rest.RestApi`), so MCP and REST
answer the same by construction and roles and project isolation stay the API's: a 403 or 404 of the API is the MCP
tool error, with the API's message. Two ways in:
- `/mcp` (streamable HTTP) mounted in the API app (`mount.py`): the token of each MCP request is forwarded to the app
  itself through an in-process ASGI transport, no network hop; no valid token is 401 before MCP sees the request.
- `ctxbudget mcp` (stdio, `stdio.py`) for a master agent on the same machine: the same server, calling the API over
  HTTP with a token from a file or the environment. It never opens chdb itself (one process owns an embedded path).
"""

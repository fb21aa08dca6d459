"""The HTTP side (spec 5.2, 6, 7): the worker report API, the conversation-list BFF, server-sent events.

Writes go to Kafka (the engine's inputs) and are acknowledged only once Kafka has them; reads come from the ClickHouse
read models the sinks keep. `create_app` builds the FastAPI app from its collaborators; `serve` runs it with uvicorn
inside an existing event loop (the pipeline's, in `ctxbudget run`).
"""

from api.app import create_app
from api.server import serve

__all__ = ["create_app", "serve"]

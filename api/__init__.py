"""The HTTP side (spec 5.2, 6, 7): the worker report API, the conversation-list BFF, server-sent events.

Writes go to Kafka (the engine's inputs) and are acknowledged only once Kafka has them; reads come from the ClickHouse
read models the sinks keep. `api.app.create_app` builds the FastAPI app from its collaborators; `api.server.serve`
runs it with uvicorn inside an existing event loop (the pipeline's, in `ctxbudget run`). Nothing is imported here:
the worker's own commands (`ctxbudget hook`, `statusline`) import `api.cli` and `api.settings` without FastAPI.
"""

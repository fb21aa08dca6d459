"""Logging for every process: one JSON object per line (python-json-logger) or plain text, at a configured level.

Context travels as `extra=` fields (thread_id, project_id, reason, offsets), which the JSON formatter writes as keys.
The wiring never logs record values at INFO: dead letters and alerts are logged by id and reason (streams.metrics).
`logging_config` is a `logging.config.dictConfig` dict, so Faust's worker (`faust.Worker(logging_config=...)`),
uvicorn (`log_config=`) and the CLI all take the same one.
"""

from __future__ import annotations

import logging.config
from typing import Any, Literal

LogFormat = Literal["json", "text"]

JSON_FIELDS = "%(asctime)s %(levelname)s %(name)s %(message)s"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LEVEL_ALIASES = {"WARN": "WARNING"}


def logging_config(level: str, fmt: LogFormat) -> dict[str, Any]:
    formatter: dict[str, Any] = (
        {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": JSON_FIELDS,
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        }
        if fmt == "json"
        else {"format": TEXT_FORMAT}
    )
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": formatter},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "default"}},
        "root": {"level": LEVEL_ALIASES.get(level.upper(), level.upper()), "handlers": ["stderr"]},
    }


def configure_logging(level: str, fmt: LogFormat) -> None:
    logging.config.dictConfig(logging_config(level, fmt))

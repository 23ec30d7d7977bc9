"""Logging set-up: plain text or one JSON object per line (`log_format`), and the
request log, one line per Translator call at debug level (logger `attnmt.requests`)
with the trace id, the model, the status and the timings (from rpc_record.py)."""

from __future__ import annotations

import json
import logging
import sys
import time

from attnmt.service.server.rpc_record import RpcRecord

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
requests_log = logging.getLogger("attnmt.requests")


class JsonFormatter(logging.Formatter):
    """time (UTC, ISO 8601), level, logger, message, the record's `fields` if any, and the traceback."""

    converter = time.gmtime

    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": f"{self.formatTime(record, '%Y-%m-%dT%H:%M:%S')}.{int(record.msecs):03d}Z",
                 "level": record.levelname.lower(), "logger": record.name, "message": record.getMessage()}
        entry.update(getattr(record, "fields", {}))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure(level: str, form: str) -> None:
    """The root logger to stderr at `level`, in `form` ('text' or 'json')."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if form == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def request_fields(record: RpcRecord) -> dict:
    """The call's figures; per-sentence timings are the slowest of its sentences."""
    jobs = record.jobs

    def longest(start: str, end: str) -> float | None:
        spans = [getattr(j, end) - getattr(j, start) for j in jobs
                 if getattr(j, start) is not None and getattr(j, end) is not None]
        return max(spans, default=None)

    done = [j for j in jobs if j.finished is not None]
    return {"trace_id": record.trace_id or None, "method": record.method, "model": record.model or None,
            "protocol": record.protocol, "status": record.code, "details": record.details or None,
            "sentences": record.sentences, "decoded": len(jobs), "duration_ms": _ms(record.seconds),
            "queue_ms": _ms(longest("enqueued", "joined")), "encode_ms": _ms(longest("joined", "encoded")),
            "decode_ms": _ms(longest("encoded", "finished")),
            "steps": max((j.steps for j in done), default=None),
            "mean_batch_rows": round(sum(j.rows for j in done) / max(sum(j.steps for j in done), 1), 1)
            if done else None}


def log_request(record: RpcRecord) -> None:
    """The request log sink: text keeps the figures in the message, JSON as fields."""
    if not requests_log.isEnabledFor(logging.DEBUG):
        return
    fields = request_fields(record)
    text = " ".join(f"{k}={v}" for k, v in fields.items() if v is not None and k != "method")
    requests_log.debug("%s %s", record.method, text, extra={"fields": fields})

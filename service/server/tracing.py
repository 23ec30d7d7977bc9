"""OpenTelemetry traces of Translator calls (`ATTNMT_TRACING=true`, `pip install 'attnmt[otel]'`).

One SERVER span per call, continuing the caller's trace (`traceparent` metadata,
or whatever OTEL_PROPAGATORS names), with the sentence count and the status; for
each sentence it decoded, child spans for its queue wait, its encoding and its
decoding. Those come from the decode worker's timestamps after the call ended
(rpc_record.py), because the work is batched across calls: a sentence's encoding
is shared with the sentences that joined the same step, and its decoding with
every batch-mate, so the decode span carries the steps it was in and the rows
of those steps (rows / steps: the batch it shared). Exporter, endpoint,
sampler and resource come from the standard OTEL_* variables
(OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER...).
"""

from __future__ import annotations

from google.rpc import code_pb2

from attnmt.service.errors import ConfigError
from attnmt.service.server.rpc_record import RpcRecord

# Server-side failures by OpenTelemetry's gRPC conventions; the other codes leave the
# span's status unset (the caller's doing), with the code as an attribute either way.
SERVER_ERRORS = {"UNKNOWN", "DEADLINE_EXCEEDED", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS"}
MAX_TRACED_SENTENCES = 64     # a long TranslateStream would otherwise make thousands of spans


def make_provider():
    """A TracerProvider exporting over OTLP/gRPC in batches, configured by OTEL_* variables."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    provider = TracerProvider(resource=Resource.create({"service.name": "attnmt"}))   # OTEL_SERVICE_NAME wins
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


class Tracing:
    """The sink that turns a finished call's record into spans."""

    def __init__(self):
        try:
            from opentelemetry import propagate, trace
            from opentelemetry.trace import SpanKind, Status, StatusCode
        except ImportError as e:
            raise ConfigError("tracing: OpenTelemetry is not installed; pip install 'attnmt[otel]'") from e
        self.provider = make_provider()
        self.tracer = self.provider.get_tracer("attnmt")
        self._trace, self._propagate = trace, propagate
        self._kind, self._status, self._code = SpanKind.SERVER, Status, StatusCode

    def __call__(self, record: RpcRecord) -> None:
        trace = self._trace
        parent = self._propagate.extract({k: v for k, v in record.metadata if isinstance(v, str)})
        service, _, method = record.method.strip("/").partition("/")
        span = self.tracer.start_span(record.method.strip("/"), context=parent, kind=self._kind,
                                      start_time=record.start_ns, attributes={
                                          "rpc.system": "grpc", "rpc.service": service, "rpc.method": method,
                                          "attnmt.sentences": record.sentences,
                                          "attnmt.decoded_sentences": len(record.jobs)})
        record.trace_id = format(span.get_span_context().trace_id, "032x")
        span.set_attribute("attnmt.protocol", record.protocol)     # http: the same RPC through service/http/
        if record.model:
            span.set_attribute("attnmt.model", record.model)
        span.set_attribute("rpc.grpc.status_code", _code_number(record.code))
        if record.code != "OK":
            span.set_attribute("attnmt.error", f"{record.code}: {record.details}")
        if record.code in SERVER_ERRORS:
            span.set_status(self._status(self._code.ERROR, f"{record.code}: {record.details}"))
            if isinstance(record.error, Exception) and type(record.error).__name__ != "AbortError":
                span.record_exception(record.error)
        within = trace.set_span_in_context(span)
        for index, job in enumerate(record.jobs[:MAX_TRACED_SENTENCES]):
            self._sentence_spans(record, job, index, within)
        if len(record.jobs) > MAX_TRACED_SENTENCES:
            span.set_attribute("attnmt.untraced_sentences", len(record.jobs) - MAX_TRACED_SENTENCES)
        span.end(end_time=record.start_ns + int(record.seconds * 1e9))

    def _sentence_spans(self, record: RpcRecord, job, index: int, within) -> None:
        """queue -> encode -> decode, as far as the sentence got (one that expired in the
        queue has a queue span that ends when the call did)."""
        call_end = record.end
        phases = [("attnmt.queue", job.enqueued, job.joined or call_end, {}),
                  ("attnmt.encode", job.joined, job.encoded, {}),
                  ("attnmt.decode", job.encoded, job.finished or (job.encoded and call_end),
                   {"attnmt.steps": job.steps, "attnmt.rows": job.rows} if job.finished else {})]
        for name, start, end, attributes in phases:
            if start is None or not end:
                continue
            child = self.tracer.start_span(name, context=within, start_time=record.epoch_ns(start),
                                           attributes={"attnmt.sentence": index, "attnmt.source_tokens":
                                                       job.search.src_len, **attributes})
            child.end(end_time=record.epoch_ns(end))

    def shutdown(self) -> None:
        """Export what is still buffered."""
        self.provider.shutdown()


def _code_number(name: str) -> int:
    return code_pb2.Code.Value(name) if name in code_pb2.Code.keys() else code_pb2.UNKNOWN

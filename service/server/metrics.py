"""Every Prometheus metric the server exports, defined once.

gRPC metrics use the names of go-grpc-prometheus / py-grpc-prometheus, which
existing dashboards know. The service's own are in base units (seconds), with
counters ending in `_total` and no per-request labels.
"""

from __future__ import annotations

from contextvars import ContextVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics

disable_created_metrics()  # no *_created series: they double the scrape and dashboards ignore them

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
STEP_BUCKETS = (0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1)
ROW_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)

REJECT_REASONS = ("queue_full", "invalid_input", "draining", "cancelled", "deadline_exceeded")
PROTOCOLS = ("grpc", "http")
# The protocol of the call being answered, for the `protocol` label: "grpc" unless the HTTP front
# (service/http/front.py, `Metered`) set "http" for the task that answers an HTTP request. A sentence
# carries it into the decode worker on its Job.
CALL_PROTOCOL: ContextVar[str] = ContextVar("attnmt_call_protocol", default="grpc")
WARMUP = "warmup"       # the server's own warm-up sentences: no call, not counted as translated


class Children:
    """A labelled metric's children, each looked up in prometheus_client once (its `labels`
    validates the values and takes a lock every time; the server counts several per call).
    A child is still made on first use, as `labels` would: no series appears earlier."""

    def __init__(self, metric):
        self.metric = metric
        self._children: dict[tuple[str, ...], object] = {}

    def __call__(self, *values: str):
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self.metric.labels(*values)
        return child


class Metrics:
    """One registry per server, so tests can run several servers in one process."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        grpc_labels = ("grpc_service", "grpc_method", "grpc_type")
        self.started = Counter("grpc_server_started_total", "RPCs started on the server.", grpc_labels, registry=r)
        self.handled = Counter("grpc_server_handled_total", "RPCs completed on the server, by status code.",
                               grpc_labels + ("grpc_code",), registry=r)
        self.handling = Histogram("grpc_server_handling_seconds", "Time from RPC start to its status.",
                                  grpc_labels, buckets=LATENCY_BUCKETS, registry=r)
        self.msg_received = Counter("grpc_server_msg_received_total", "Messages received from clients.",
                                    grpc_labels, registry=r)
        self.msg_sent = Counter("grpc_server_msg_sent_total", "Messages sent to clients.", grpc_labels, registry=r)

        # HTTP beside gRPC (service/http/): OpenTelemetry's semantic-convention names, in Prometheus
        # form; `route` is the route's template (/v1/models/{name}), never the path a client sent.
        http_labels = ("method", "route")
        self.http_requests = Counter("http_server_requests_total", "HTTP requests answered, by status code.",
                                     http_labels + ("code",), registry=r)
        self.http_duration = Histogram("http_server_request_duration_seconds", "Time from an HTTP request's "
                                       "arrival to the end of its answer.", http_labels, buckets=LATENCY_BUCKETS,
                                       registry=r)
        self.http_active = Gauge("http_server_active_requests", "HTTP requests being answered.", registry=r)

        # Read from the decode workers at scrape time (`watch`): summed over every model's workers.
        self._workers: list = []
        self.queue_depth = Gauge("attnmt_queue_depth", "Sentences waiting to join a decode batch.", registry=r)
        self.inflight = Gauge("attnmt_inflight_sentences", "Sentences in the decode batches.", registry=r)
        self.cache_bytes = Gauge("attnmt_decoder_cache_bytes", "Bytes of the decode batches' growing states (a "
                                 "Transformer's self-attention caches) at their last step; 0 for an RNNsearch.",
                                 registry=r)
        self.queue_depth.set_function(lambda: sum(w.waiting for w in self._workers))
        self.inflight.set_function(lambda: sum(w.inflight for w in self._workers))
        self.cache_bytes.set_function(lambda: sum(w.cache_bytes for w in self._workers))
        self.batch_rows = Histogram("attnmt_batch_rows", "Decoder rows per step (a beam of k is k rows).",
                                    buckets=ROW_BUCKETS, registry=r)
        self.queue_wait = Histogram("attnmt_queue_wait_seconds", "Time from admission to joining the batch.",
                                    buckets=LATENCY_BUCKETS, registry=r)
        self.step_seconds = Histogram("attnmt_step_seconds", "Time of one decoder step for the whole batch.",
                                      buckets=STEP_BUCKETS, registry=r)
        self.encoder_seconds = Histogram("attnmt_encoder_seconds", "Time to encode the sentences joining a step.",
                                         buckets=STEP_BUCKETS, registry=r)
        self.sentences = Counter("attnmt_sentences_total", "Sentences translated or aligned, by model and by the "
                                 "protocol they came by (grpc, http); a long sentence's parts count each.",
                                 ("model", "protocol"), registry=r)
        self.source_tokens = Counter("attnmt_source_tokens_total", "Source tokens of translated sentences.",
                                     ("model",), registry=r)
        self.target_tokens = Counter("attnmt_target_tokens_total", "Target tokens generated (best hypothesis).",
                                     ("model",), registry=r)
        self.rejected = Counter("attnmt_rejected_total", "Sentences not translated, by reason and by the protocol "
                                "they came by (grpc, http).", ("reason", "protocol"), registry=r)
        self.step_failures = Counter("attnmt_step_failures_total", "Decoder steps that raised.", registry=r)
        self.idle_steps = Counter("attnmt_idle_steps_total", "Decoder steps run while the server was idle (at most "
                                  "8 rows, nobody waiting or refused for 10 s): with idle_spinning, on spinning "
                                  "threads.", registry=r)
        self.cache_requests = Counter("attnmt_cache_requests_total",
                                      "Translation cache lookups, by result (hit, miss).",
                                      ("model", "result"), registry=r)
        self.cache_entries = Gauge("attnmt_cache_entries", "Finished translations held in the cache.", ("model",),
                                   registry=r)
        self.model_info = Gauge("attnmt_model_info", "Served models (value 1).", ("model", "version", "provider"),
                                registry=r)
        self.ready = Gauge("attnmt_ready", "1 when every model is loaded and warmed up.", registry=r)
        for reason in REJECT_REASONS:  # present from the start, so rate() works from the first scrape
            for protocol in PROTOCOLS:
                self.rejected.labels(reason, protocol)

    def watch(self, worker) -> None:
        """Count a decode worker (worker.py) in the queue, in-flight and cache gauges: its
        `waiting`, `inflight` and `cache_bytes`, read at each scrape."""
        self._workers.append(worker)

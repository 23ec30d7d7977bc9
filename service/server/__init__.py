"""The gRPC server: settings, servicer, streaming, status mapping, protobuf conversion,
scheduler, decode worker, admission, overload, interceptors, metrics, tracing, logs."""

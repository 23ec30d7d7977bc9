"""The gRPC server: settings, servicer, protobuf conversion, scheduler, decode worker, admission, interceptors, metrics, tracing, logs."""

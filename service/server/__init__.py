"""The serving core and the gRPC transport over it. The core: core.py (the API both transports
call), protobuf conversion, scheduler, decode worker, admission, overload, cache, settings,
metrics, call records, tracing, logs. gRPC: app (the server), servicer, wire, streaming, status
mapping, interceptors, reflection."""

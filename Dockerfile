# attnmt serving image: `attnmt serve` with the three bundled models (Spanish→English twice, English→Spanish)
# and their model cards.
#
#   docker build --platform linux/amd64 -t attnmt:0.1.0 .                           # CPU: onnxruntime
#   docker build --platform linux/amd64 --build-arg ORT=gpu -t attnmt:0.1.0-gpu .   # CUDA: + NVIDIA pip libraries
#   docker build --platform linux/amd64 --build-arg ORT=openvino -t attnmt:0.1.0-openvino .
#       # + OpenVINO's execution provider; run with ATTNMT_DEVICE=openvino [ATTNMT_PRECISION=bf16]
#   docker run --rm -p 50051:50051 -p 8080:8080 -p 8002:8002 attnmt:0.1.0
#   deploy/smoke-test.sh attnmt:0.1.0     # runs it as the Kubernetes base does, and checks it
#
# linux/amd64: the locks in deploy/requirements/ are resolved for CPython 3.11 on Linux x86_64.
#
# Settings are ATTNMT_* environment variables (service/server/settings.py). No torch:
# the image holds ONNX Runtime, gRPC, Starlette and uvicorn (HTTP) and the model files serving reads.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- build: a virtualenv with attnmt and its locked dependencies, and the model directory ---
FROM ${PYTHON_IMAGE} AS build

# The ONNX Runtime build, each with its lock in deploy/requirements/ (`make lock`), all three
# of one ONNX Runtime release:
# cpu: onnxruntime, the CPU build (pyproject names onnxruntime-gpu on Linux x86_64; the service
#      code is the same, so `pip check` would complain that attnmt wants onnxruntime-gpu: expected).
# openvino: onnxruntime plus OpenVINO's plugin execution provider (PyPI onnxruntime-ep-openvino,
#      about 160 MB; bf16 on CPUs with AMX; it finds a device on Intel CPUs only).
# gpu: onnxruntime-gpu with CUDA and cuDNN as pip packages (its [cuda,cudnn] extras, about
#      2 GB), which the engine finds through onnxruntime.preload_dlls(); the host needs an
#      NVIDIA driver new enough for the CUDA that onnxruntime-gpu release was built against.
ARG ORT=cpu

# ORT_DISABLE_TELEMETRY: see the runtime stage.
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    ORT_DISABLE_TELEMETRY=1
# pip compiles the .pyc files at install time: the read-only root filesystem
# in Kubernetes leaves Python no other chance to.
RUN python -m venv /opt/attnmt
ENV PATH=/opt/attnmt/bin:$PATH

WORKDIR /src
# Exactly the locked files, each checked against its hash; a layer of its own, which a change
# to the code leaves cached.
COPY deploy/requirements/ requirements/
RUN test -f "requirements/${ORT}.txt" || { echo "ORT must be cpu, openvino or gpu, not '${ORT}'" >&2; exit 1; } \
    && pip install --no-cache-dir --no-deps --require-hashes -r "requirements/${ORT}.txt"

COPY pyproject.toml README.md ./
COPY service/ service/
COPY model/ model/
COPY bench/ bench/
COPY corpus/ corpus/
# attnmt itself, built by the locked setuptools, less the training world (attnmt.model), the
# measurement world (attnmt.bench) and the corpus readers they share (attnmt.corpus): setuptools
# installs every package pyproject.toml lists, and serving needs none of them, so they are removed
# and `attnmt` then lacks their commands. Then the self-check: the server's imports (a dependency
# missing from the lock fails here), that the three are gone, and ONNX Runtime. For openvino, that
# the plugin library loads: get_available_providers() never lists a plugin, and only an Intel CPU
# gives it a device, so the devices are shown, not required.
RUN pip install --no-cache-dir --no-deps --no-build-isolation . \
    && package="$(python -c 'import attnmt.service, pathlib; print(pathlib.Path(attnmt.service.__file__).parents[1])')" \
    && rm -r "$package/model" "$package/bench" "$package/corpus" \
    && python -c 'import attnmt.service.server.app' && attnmt serve --help > /dev/null \
    && ! python -c 'import attnmt.model' 2> /dev/null && ! python -c 'import attnmt.bench' 2> /dev/null \
    && ! python -c 'import attnmt.corpus' 2> /dev/null \
    && ! attnmt bench --help > /dev/null 2>&1 \
    && case "$ORT" in \
         openvino) python -c 'import onnxruntime as ort, onnxruntime_ep_openvino as ov; \
                   ort.register_execution_provider_library(ov.get_ep_name(), ov.get_library_path()); \
                   devices = [d.device.vendor for d in ort.get_ep_devices() if d.ep_name == ov.get_ep_name()]; \
                   print("onnxruntime", ort.__version__, "+", ov.get_ep_name(), "loaded; devices on this CPU:", \
                         devices or "none (it lists one on Intel CPUs)")' ;; \
         *) python -c 'import onnxruntime as ort; print("onnxruntime", ort.__version__, ort.get_available_providers())' ;; \
       esac

# The model directory as serving reads it: .dockerignore keeps checkpoint.pt and eval/ out; the
# manifest marks checkpoint.pt `serving: false`, so the directory is complete without it.
# load_manifest checks the rest, every checksum, as the server will.
# Three models: the default Transformer and the RNNsearch (Spanish→English, the RNNsearch served by
# name), and the English→Spanish Transformer, which requests for that pair reach. Each directory
# carries its MODEL_CARD.md (training data and licences, intended use, evaluation), which ships too.
COPY models/transformer-es-en/ /models/transformer-es-en/
COPY models/rnnsearch-es-en/ /models/rnnsearch-es-en/
COPY models/transformer-en-es/ /models/transformer-en-es/
RUN python -c 'from attnmt.service.modeldir.manifest import load_manifest; \
    [load_manifest(m) for m in ("/models/transformer-es-en", "/models/rnnsearch-es-en", "/models/transformer-en-es")]'

# --- runtime: the virtualenv, the model directory, a non-root user ---
FROM ${PYTHON_IMAGE}

# ORT_DISABLE_TELEMETRY: ONNX Runtime's Linux wheels collect usage telemetry for upload and keep
# a device id under $XDG_CACHE_HOME or ~/.cache; with HOME=/nonexistent that failed, with a
# warning at every start. The pods may open no connection (NetworkPolicy), so nothing could be
# sent anyway: switched off, ONNX Runtime writes and sends nothing. (The engine sets it too,
# service/inference/__init__.py; here it also covers the build stage's checks.)
ENV PATH=/opt/attnmt/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    ORT_DISABLE_TELEMETRY=1 \
    ATTNMT_MODELS=/models/transformer-es-en,/models/rnnsearch-es-en,/models/transformer-en-es

# A fixed numeric uid, so Kubernetes' runAsNonRoot can verify it without /etc/passwd.
RUN groupadd --system --gid 10001 attnmt \
    && useradd --system --uid 10001 --gid attnmt --no-create-home --home-dir /nonexistent \
               --shell /usr/sbin/nologin attnmt

COPY --from=build /opt/attnmt /opt/attnmt
# Owned by root and read-only to the service: a model directory is never written at serving time.
COPY --from=build /models/ /models/

USER 10001:10001
# 50051: gRPC (attnmt.v1.Translator, grpc.health.v1, reflection); 8080: HTTP (/v1/, LibreTranslate's
# API, /healthz, /readyz, the web page; ATTNMT_HTTP_ENABLED=false turns it off); 8002: Prometheus
# /metrics. The ports are the settings' defaults, so no ENV sets them.
EXPOSE 50051 8080 8002
# Kubernetes ignores HEALTHCHECK; its gRPC probes call grpc.health.v1 on 50051 (deploy/kubernetes).
ENTRYPOINT ["attnmt", "serve"]

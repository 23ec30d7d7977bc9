# attnmt serving image: `attnmt serve` with the bundled Spanish→English model.
#
#   docker build --platform linux/amd64 -t attnmt:0.1.0 .                           # CPU: onnxruntime
#   docker build --platform linux/amd64 --build-arg ORT=gpu -t attnmt:0.1.0-gpu .   # CUDA: + NVIDIA pip libraries
#   docker build --platform linux/amd64 --build-arg ORT=openvino -t attnmt:0.1.0-openvino .
#       # + OpenVINO's execution provider; run with ATTNMT_DEVICE=openvino [ATTNMT_PRECISION=bf16]
#   docker run --rm -p 50051:50051 -p 8002:8002 attnmt:0.1.0
#
# linux/amd64: pyproject selects onnxruntime-gpu there, which this build relies on.
#
# Settings are ATTNMT_* environment variables (service/config.py). No torch:
# the image holds ONNX Runtime, gRPC and the model directory only.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- build: a virtualenv with attnmt and its runtime dependencies ---
FROM ${PYTHON_IMAGE} AS build

# cpu: swap onnxruntime-gpu (what pyproject picks on Linux x86_64) for the much
#      smaller onnxruntime of the same version; the service code is the same.
#      (`pip check` would now complain that attnmt wants onnxruntime-gpu: expected.)
# openvino: onnxruntime as for cpu, plus OpenVINO's plugin execution provider
#      (PyPI onnxruntime-ep-openvino, about 160 MB; bf16 on CPUs with AMX).
# gpu: keep onnxruntime-gpu and add CUDA and cuDNN as pip packages
#      (its [cuda,cudnn] extras, about 2 GB), which the engine finds through
#      onnxruntime.preload_dlls(); the host needs an NVIDIA driver new enough
#      for the CUDA that onnxruntime-gpu release was built against.
ARG ORT=cpu

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
# pip compiles the .pyc files at install time: the read-only root filesystem
# in Kubernetes leaves Python no other chance to.
RUN python -m venv /opt/attnmt
ENV PATH=/opt/attnmt/bin:$PATH

WORKDIR /src
COPY pyproject.toml README.md ./
COPY service/ service/
COPY model/*.py model/
COPY model/configs/ model/configs/

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN pip install --no-cache-dir . \
    && ort_version="$(pip show onnxruntime-gpu | sed -n 's/^Version: //p')" \
    && case "$ORT" in \
         cpu) pip uninstall -y onnxruntime-gpu \
              && pip install --no-cache-dir "onnxruntime==${ort_version}" ;; \
         openvino) pip uninstall -y onnxruntime-gpu \
              && pip install --no-cache-dir "onnxruntime==${ort_version}" "onnxruntime-ep-openvino==1.8.1" ;; \
         gpu) pip install --no-cache-dir "onnxruntime-gpu[cuda,cudnn]==${ort_version}" ;; \
         *)   echo "ORT must be cpu, openvino or gpu, not '$ORT'" >&2; exit 1 ;; \
       esac \
    && python -c "import onnxruntime as ort; print('onnxruntime', ort.__version__, ort.get_available_providers())"

# --- runtime: the virtualenv, the model directory, a non-root user ---
FROM ${PYTHON_IMAGE}

ENV PATH=/opt/attnmt/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    ATTNMT_MODELS=/models/rnnsearch-es-en

# A fixed numeric uid, so Kubernetes' runAsNonRoot can verify it without /etc/passwd.
RUN groupadd --system --gid 10001 attnmt \
    && useradd --system --uid 10001 --gid attnmt --no-create-home --home-dir /nonexistent \
               --shell /usr/sbin/nologin attnmt

COPY --from=build /opt/attnmt /opt/attnmt
# Owned by root and read-only to the service: a model directory is never written at serving time.
COPY models/rnnsearch-es-en/ /models/rnnsearch-es-en/

USER 10001:10001
# 50051: gRPC (attnmt.v1.Translator, grpc.health.v1, reflection); 8002: Prometheus /metrics.
EXPOSE 50051 8002
# Kubernetes ignores HEALTHCHECK; its gRPC probes call grpc.health.v1 on 50051 (deploy/kubernetes).
ENTRYPOINT ["attnmt", "serve"]

# clustersim: the CLI in a container. `docker run IMAGE simulate /data/request.yaml` runs a batch simulation.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY api_schemas ./api_schemas
COPY topology ./topology
COPY simcore ./simcore
COPY service ./service
COPY examples ./examples
RUN pip install --no-cache-dir . && useradd --create-home clustersim
USER clustersim
ENTRYPOINT ["clustersim"]
CMD ["--help"]

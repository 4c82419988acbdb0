# clustersim: the HTTP service by default, any CLI subcommand when given one.
#   docker run -p 8000:8000 -v clustersim-data:/var/lib/clustersim IMAGE          # serves the API on port 8000
#   docker run -e CLUSTERSIM_PORT=9000 -p 9000:9000 IMAGE                          # ... or on another port
#   docker run -v $PWD/examples:/data IMAGE simulate /data/gpt-1t-3072-a100.yaml   # one batch simulation
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY api_schemas ./api_schemas
COPY interop ./interop
COPY topology ./topology
COPY simcore ./simcore
COPY service ./service
COPY clustersim ./clustersim
COPY examples ./examples
RUN pip install --no-cache-dir . \
    && useradd --create-home --uid 10001 clustersim \
    && mkdir -p /var/lib/clustersim && chown clustersim:clustersim /var/lib/clustersim
# Jobs and the results cache live in one SQLite file on a volume, so they survive a new container.
ENV CLUSTERSIM_DATABASE=/var/lib/clustersim/clustersim.db \
    PYTHONUNBUFFERED=1
VOLUME ["/var/lib/clustersim"]
USER clustersim
# The port the service listens on: CLUSTERSIM_PORT (or `serve --port N`); the health check follows either.
ENV CLUSTERSIM_PORT=8000
EXPOSE 8000
# Checks /healthz on the serving port when the container serves; a batch subcommand (simulate, validate, ...)
# has nothing to check.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-m", "service.cli.healthcheck"]
ENTRYPOINT ["clustersim"]
CMD ["serve", "--host", "0.0.0.0"]

# The worker image: `docker compose up --scale worker=N` runs N of these.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY contracts ./contracts
COPY pipeline ./pipeline
COPY workers ./workers
COPY hosts ./hosts
COPY app ./app
RUN pip install --no-cache-dir .
# The knowledge index (FTS5 + chunk vectors) is built into a cache folder on first use: the
# worker runs as nobody, so the folder must be nobody's (compose mounts a volume over it).
ENV ACI_CACHE_DIR=/var/cache/aci-evidence
RUN mkdir -p /var/cache/aci-evidence && chown nobody:nogroup /var/cache/aci-evidence
USER nobody
ENTRYPOINT ["aci-evidence"]
CMD ["worker", "--concurrency", "32", "--metrics-port", "9100", "--metrics-host", "0.0.0.0"]

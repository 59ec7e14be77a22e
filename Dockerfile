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
USER nobody
ENTRYPOINT ["aci-evidence"]
CMD ["worker", "--concurrency", "32", "--metrics-port", "9100"]

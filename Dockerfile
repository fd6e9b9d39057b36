# compaction HTTP service: N of these behind a load balancer share one PostgreSQL.
#   docker build -t compaction .
#   docker run -p 8080:8080 -e DATABASE_URL=postgresql://app:secret@db:5432/compaction compaction
# Without DATABASE_URL the container keeps its sessions in a SQLite file (/data/compaction.db):
# fine for one container, not for several.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True \
    TOKENIZERS_PARALLELISM=false

WORKDIR /app
COPY pyproject.toml README.md ./
COPY compaction ./compaction
COPY guards ./guards
# psycopg[binary] brings its own libpq: no compiler, no system packages.
RUN pip install '.[server,postgres]' && rm -rf /app/compaction /app/guards

RUN useradd --system --create-home --uid 10001 compaction && mkdir /data && chown compaction /data
USER compaction
WORKDIR /data

ENV DATABASE_URL=/data/compaction.db \
    WORKERS=1 \
    PORT=8080
EXPOSE 8080
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s \
    CMD python -c "import os, urllib.request; urllib.request.urlopen(f'http://127.0.0.1:{os.environ[\"PORT\"]}/health', timeout=2)"
# exec: compaction serve becomes PID 1, so `docker stop` (SIGTERM) reaches it and it drains.
CMD exec compaction serve --host 0.0.0.0 --port "$PORT" --workers "$WORKERS" --db "$DATABASE_URL"

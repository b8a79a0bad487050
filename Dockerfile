# One image for every process; the command picks the role: `uvicorn app.main:app` (API, the
# default), `python -m app worker`, `uvicorn app.jev.main:app`, `python -m app.relay`,
# `alembic upgrade head` and `python -m app wait-for-schema` (both read ./alembic.ini). It runs
# as uid 10001 and writes nothing outside /tmp, so a read-only root filesystem works.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
# Dependencies exactly as locked, every file checked against its hash (requirements.lock is
# generated from pyproject.toml, see its header); a code change reuses this layer.
COPY requirements.lock ./
RUN pip install --require-hashes -r requirements.lock
# The project itself, its dependencies not resolved again (pip fetches only the setuptools
# that builds it).
COPY pyproject.toml README.md ./
COPY app ./app
RUN pip install --no-deps . && useradd --create-home --uid 10001 bot
COPY alembic.ini persona.md ./
COPY alembic ./alembic

USER bot
EXPOSE 8000
CMD ["uvicorn", "app.main:app", "--host", "0.0.0.0", "--port", "8000"]

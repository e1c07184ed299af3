# The cpersona server image, built once: the package is installed here, at build time, not when a
# container starts. compose.yaml runs it against a shared Redis 8 and Qdrant.
#
#   docker build -t cpersona:0.1.0 .
#   docker run -e CPERSONA_REDIS_URL=redis://… -e CPERSONA_QDRANT_URL=http://… -p 8077:8077 cpersona:0.1.0
#
# The embedding model is included in a dependency's wheel, and the recall policies (stages/) are part of the
# package, so the container downloads nothing when it runs.

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
COPY stages ./stages
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
RUN useradd --create-home --uid 10001 cpersona && mkdir /data && chown cpersona /data
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER cpersona
ENV CPERSONA_DATA_DIR=/data \
    CPERSONA_HOST=0.0.0.0 \
    PYTHONUNBUFFERED=1
VOLUME /data
EXPOSE 8077
ENTRYPOINT ["cpersona"]
CMD ["serve"]

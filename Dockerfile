# The trawler image of compose.yaml: `trawler worker` and `trawler serve` (and any
# other trawler command: `docker compose run --rm worker trawler submit …`).
FROM python:3.12-slim

WORKDIR /src
COPY pyproject.toml README.md ./
COPY trawler ./trawler
RUN pip install --no-cache-dir . \
    && useradd --create-home --uid 1000 trawler \
    && mkdir -p /data/warc && chown trawler /data/warc

USER trawler
WORKDIR /data
CMD ["trawler", "--help"]

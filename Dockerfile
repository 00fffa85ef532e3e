# The trawler image of compose.yaml: `trawler worker` and `trawler serve` (and any
# other trawler command: `docker compose run --rm worker trawler submit …`).
FROM python:3.12-slim

WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY trawler ./trawler
# gcc and zlib's headers only while pip builds the fingerprints' C extension
# (trawler/_fingerprint.c; without them the numpy code computes the same values).
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev zlib1g-dev \
    && pip install --no-cache-dir . \
    && apt-get purge -y --auto-remove gcc libc6-dev zlib1g-dev \
    && rm -rf /var/lib/apt/lists/* \
    && (cd / && python -c "import trawler._fingerprint") \
    && useradd --create-home --uid 1000 trawler \
    && mkdir -p /data/warc && chown trawler /data/warc

USER trawler
WORKDIR /data
CMD ["trawler", "--help"]

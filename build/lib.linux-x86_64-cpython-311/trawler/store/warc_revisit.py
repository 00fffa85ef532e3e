"""WARC ``revisit`` records (WARC 1.1 §6.7) for revisits that found nothing new.

Two profiles (WARC 1.1 §6.7.2, §6.7.3):

- ``server-not-modified``: the server answered 304 to a conditional GET; the
  block is the 304's HTTP head.
- ``identical-payload-digest``: a 200 whose payload has the digest of the
  version already archived; the block is the response's HTTP head only, the
  payload is named by ``WARC-Payload-Digest``.

Both name the archived version with ``WARC-Refers-To-Target-URI`` and
``WARC-Refers-To-Date``, so a replay tool (pywb) and an indexer (cdxj-indexer)
can resolve them. The request that was sent (with its validators) is archived
beside it, as for a response.
"""

from __future__ import annotations

from dataclasses import dataclass

from trawler.records import FetchResult
from trawler.store.warc import _LEVEL_TEXT, WarcLocation, WarcWriter, _gzip
from trawler.store.warc_record import (
    clean,
    http_head,
    response_headers,
    sha1_base32,
    status_line,
    warc_record,
)

PROFILE_NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
PROFILE_IDENTICAL = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"


@dataclass(slots=True)
class RefersTo:
    """The archived version a revisit record stands for."""

    target_uri: str
    fetched_at: float  # wall clock of its response


class RevisitWarcWriter(WarcWriter):
    """A WarcWriter that also writes revisit records (request and revisit pairs)."""

    def write_revisit(
        self, result: FetchResult, profile: str, refers_to: RefersTo
    ) -> WarcLocation | None:
        if result.status is None:
            return None
        fields = self._begin_pair(result)
        revisit_id = self._ids.take()
        revisit = _gzip(_revisit_record(result, revisit_id, fields, profile, refers_to, self),
                        _LEVEL_TEXT)  # fmt: skip
        request = _gzip(self._request_record(result, revisit_id, fields), _LEVEL_TEXT)
        return self._append_pair(revisit, request)


def _revisit_record(
    result: FetchResult, record_id: str, fields: str, profile: str, refers_to: RefersTo,
    writer: WarcWriter,
) -> bytes:  # fmt: skip
    assert result.status is not None
    head = http_head(
        status_line(result.http_version, result.status), response_headers(result.headers)
    )
    fields = (
        f"WARC-Type: revisit\r\nWARC-Record-ID: {record_id}\r\n{fields}"
        f"WARC-Profile: {profile}\r\n"
        f"WARC-Refers-To-Target-URI: {clean(refers_to.target_uri)}\r\n"
        f"WARC-Refers-To-Date: {writer._dates.format(refers_to.fetched_at)}\r\n"
    )
    if profile == PROFILE_IDENTICAL:  # §6.7.2: the digest of the payload not stored again
        fields += f"WARC-Payload-Digest: {sha1_base32(result.raw_body)}\r\n"
    fields += "Content-Type: application/http; msgtype=response\r\n"
    return warc_record(fields, head, b"", payload_digest=False)

"""An HTML body's bytes → text, as a browser would decode them. Pure, no I/O.

Decoding follows the WHATWG "encoding sniffing" order (BOM, transport
charset, ``<meta>`` prescan) and only then guesses; charset labels map to the
decoder a browser uses (WHATWG Encoding Standard §4.2).
"""

from __future__ import annotations

import codecs
import re

from charset_normalizer import from_bytes

_META_PRESCAN_BYTES = 4096  # WHATWG says 1024; real pages often declare later
_DETECT_BYTES = 64 * 1024  # charset-normalizer is slow: feed it a prefix only
# charset-normalizer "chaos" difference we treat as a tie. French prose in
# cp1252 scores ~0.06 worse than in cp1257 (charset-normalizer 3.x), so 0.05
# was too tight; Cyrillic, Greek, Polish and Czech never list cp1252 at all.
_NEAR_TIE = 0.1
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

# WHATWG Encoding Standard §4.2, "Names and labels": label → the decoder a
# browser uses, as a Python codec name. Browsers decode "iso-8859-1" and
# "us-ascii" as windows-1252, "gb2312" as gb18030, "shift_jis" as windows-31j.
# None: the "replacement" group and x-user-defined, which we ignore.
_WHATWG_LABELS_BY_CODEC: dict[str | None, str] = {
    "utf-8": "unicode-1-1-utf-8 unicode11utf8 unicode20utf8 utf-8 utf8 x-unicode20utf8",
    "cp866": "866 cp866 csibm866 ibm866",
    "iso8859-2": "csisolatin2 iso-8859-2 iso-ir-101 iso8859-2 iso88592 iso_8859-2 "
    "iso_8859-2:1987 l2 latin2",
    "iso8859-3": "csisolatin3 iso-8859-3 iso-ir-109 iso8859-3 iso88593 iso_8859-3 "
    "iso_8859-3:1988 l3 latin3",
    "iso8859-4": "csisolatin4 iso-8859-4 iso-ir-110 iso8859-4 iso88594 iso_8859-4 "
    "iso_8859-4:1988 l4 latin4",
    "iso8859-5": "csisolatincyrillic cyrillic iso-8859-5 iso-ir-144 iso8859-5 iso88595 "
    "iso_8859-5 iso_8859-5:1988",
    "iso8859-6": "arabic asmo-708 csiso88596e csiso88596i csisolatinarabic ecma-114 "
    "iso-8859-6 iso-8859-6-e iso-8859-6-i iso-ir-127 iso8859-6 iso88596 iso_8859-6 "
    "iso_8859-6:1987",
    "iso8859-7": "csisolatingreek ecma-118 elot_928 greek greek8 iso-8859-7 iso-ir-126 "
    "iso8859-7 iso88597 iso_8859-7 iso_8859-7:1987 sun_eu_greek",
    "iso8859-8": "csiso88598e csisolatinhebrew hebrew iso-8859-8 iso-8859-8-e iso-ir-138 "
    "iso8859-8 iso88598 iso_8859-8 iso_8859-8:1988 visual csiso88598i iso-8859-8-i logical",
    "iso8859-10": "csisolatin6 iso-8859-10 iso-ir-157 iso8859-10 iso885910 l6 latin6",
    "iso8859-13": "iso-8859-13 iso8859-13 iso885913",
    "iso8859-14": "iso-8859-14 iso8859-14 iso885914",
    "iso8859-15": "csisolatin9 iso-8859-15 iso8859-15 iso885915 iso_8859-15 l9",
    "iso8859-16": "iso-8859-16",
    "koi8-r": "cskoi8r koi koi8 koi8-r koi8_r",
    "koi8-u": "koi8-ru koi8-u",
    "mac-roman": "csmacintosh mac macintosh x-mac-roman",
    "mac-cyrillic": "x-mac-cyrillic x-mac-ukrainian",
    "cp874": "dos-874 iso-8859-11 iso8859-11 iso885911 tis-620 windows-874",
    "cp1250": "cp1250 windows-1250 x-cp1250",
    "cp1251": "cp1251 windows-1251 x-cp1251",
    "cp1252": "ansi_x3.4-1968 ascii cp1252 cp819 csisolatin1 ibm819 iso-8859-1 iso-ir-100 "
    "iso8859-1 iso88591 iso_8859-1 iso_8859-1:1987 l1 latin1 us-ascii windows-1252 x-cp1252",
    "cp1253": "cp1253 windows-1253 x-cp1253",
    "cp1254": "cp1254 csisolatin5 iso-8859-9 iso-ir-148 iso8859-9 iso88599 iso_8859-9 "
    "iso_8859-9:1989 l5 latin5 windows-1254 x-cp1254",
    "cp1255": "cp1255 windows-1255 x-cp1255",
    "cp1256": "cp1256 windows-1256 x-cp1256",
    "cp1257": "cp1257 windows-1257 x-cp1257",
    "cp1258": "cp1258 windows-1258 x-cp1258",
    "gb18030": "chinese csgb2312 csiso58gb231280 gb2312 gb_2312 gb_2312-80 gbk iso-ir-58 "
    "x-gbk gb18030",
    "big5hkscs": "big5 big5-hkscs cn-big5 csbig5 x-x-big5",
    "euc_jp": "cseucpkdfmtjapanese euc-jp x-euc-jp",
    "iso2022_jp": "csiso2022jp iso-2022-jp",
    "cp932": "csshiftjis ms932 ms_kanji shift-jis shift_jis sjis windows-31j x-sjis",
    "cp949": "cseuckr csksc56011987 euc-kr iso-ir-149 korean ks_c_5601-1987 ks_c_5601-1989 "
    "ksc5601 ksc_5601 windows-949",
    "utf-16-be": "unicodefffe utf-16be",
    "utf-16-le": "csunicode iso-10646-ucs-2 ucs-2 unicode unicodefeff utf-16 utf-16le",
    None: "csiso2022kr hz-gb-2312 iso-2022-cn iso-2022-cn-ext iso-2022-kr replacement "
    "x-user-defined",
}
_WHATWG_LABELS = {
    label: codec for codec, labels in _WHATWG_LABELS_BY_CODEC.items() for label in labels.split()
}
# Codecs Python knows that no browser would use to read a web page.
_REFUSED_CODECS = frozenset(
    {"utf-7", "idna", "punycode", "raw-unicode-escape", "unicode-escape", "undefined"}
    | {"mbcs", "oem", "utf-32", "utf-32-le", "utf-32-be"}
)
_META_CHARSET = re.compile(rb"<meta[^>]*?charset\s*=\s*[\"']?\s*([a-z0-9_.:+-]+)", re.IGNORECASE)


def decode_html(body: bytes, header_charset: str | None) -> tuple[str, str]:
    """Decode an HTML body; return (text, Python codec name used). Never raises.

    Order: BOM, Content-Type charset, ``<meta>`` charset, strict UTF-8, a
    guess (mostly-UTF-8, then charset-normalizer), and windows-1252.
    """
    for bom, codec in _BOMS:
        if body.startswith(bom):
            return _decode(body[len(bom) :], codec)
    declared = codec_for_label(header_charset) or _meta_charset(body)
    if declared is not None:
        return _decode(body, declared)
    try:
        return body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return _decode_undeclared(body)


def codec_for_label(label: str | None) -> str | None:
    """Map a charset label to the Python codec a browser would use, or None."""
    if not label:
        return None
    label = label.strip(" \t\r\n\f\"'").lower()
    for candidate in (label, label.replace("_", "-")):
        if candidate in _WHATWG_LABELS:
            return _WHATWG_LABELS[candidate]
    try:
        info = codecs.lookup(label)
    except (LookupError, ValueError):
        return None
    if not getattr(info, "_is_text_encoding", True) or info.name in _REFUSED_CODECS:
        return None  # base64, rot13, zlib, ... are not text encodings
    return _WHATWG_LABELS.get(info.name, info.name)


def _meta_charset(body: bytes) -> str | None:
    match = _META_CHARSET.search(body, 0, _META_PRESCAN_BYTES)
    if match is None:
        return None
    codec = codec_for_label(match.group(1).decode("ascii"))
    # WHATWG prescan: a UTF-16 declaration readable as ASCII is really UTF-8.
    return "utf-8" if codec in ("utf-16-le", "utf-16-be") else codec


def _decode(body: bytes, codec: str) -> tuple[str, str]:
    try:
        return body.decode(codec, "replace"), codec
    except (LookupError, UnicodeError):  # a codec that fails even with "replace"
        return body.decode("cp1252", "replace"), "cp1252"


def _decode_undeclared(body: bytes) -> tuple[str, str]:
    """Guess the charset of a body that is not valid UTF-8 and declares none."""
    sample = body[:_DETECT_BYTES]
    lenient = sample.decode("utf-8", "replace")
    # Each valid multi-byte sequence shortens the text by >= 1; if those
    # outnumber the bad bytes, this is UTF-8 with some stray bytes mixed in.
    if len(sample) - len(lenient) > lenient.count("\ufffd"):
        return _decode(body, "utf-8")
    return _decode(body, _detect_codec(sample))


def _detect_codec(sample: bytes) -> str:
    results = from_bytes(sample)
    best = results.best()
    if best is None:
        return "cp1252"
    # charset-normalizer breaks near-ties between Latin code pages arbitrarily
    # (French comes back as cp1257); prefer what browsers fall back to.
    for match in results:
        if "cp1252" in match.could_be_from_charset and match.chaos <= best.chaos + _NEAR_TIE:
            return "cp1252"
    return codec_for_label(best.encoding) or "cp1252"

"""Writes tests/data/hostile/: one file per kind of hostile input, and EXPECTED.json.

EXPECTED.json maps each file to the outcome of each of its non-blank lines, in order:
"valid", or a substring the quarantine reason must contain. Run it again after editing:
    python tests/data/make_hostile_corpus.py

The files of :data:`MADE_AT_TEST_TIME` (a line over 10 MiB) are not kept in git: the test
writes them beside its copy of the corpus (:func:`write_made_at_test_time`).
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent / "hostile"


def event(**overrides) -> dict:
    record = {
        "event_id": "x",
        "event_type": "purchase",
        "user_id": "u1",
        "product_id": "p1",
        "revenue": 1.25,
        "event_timestamp": "2026-11-20T10:00:00Z",
    }
    record.update(overrides)
    return {k: v for k, v in record.items() if v is not ...}


def line(eid: str, **overrides) -> bytes:
    return json.dumps(event(event_id=eid, **overrides)).encode()


CASES: dict[str, list[tuple[bytes, str]]] = {
    "invalid-utf8.json": [
        (line("u8-1").replace(b'"u1"', b'"u\xff1"'), "invalid UTF-8"),
        (line("u8-2").replace(b'"p1"', b'"p\xc3\x281"'), "invalid UTF-8"),
        (line("u8-3", category="caf\u00e9"), "valid"),
    ],
    "bom.json": [
        (b"\xef\xbb\xbf" + line("bom-1"), "valid"),
        (line("bom-2"), "valid"),
        # Only one byte-order mark is ignored; a second one is not JSON.
        (b"\xef\xbb\xbf\xef\xbb\xbf" + line("bom-3"), "malformed JSON: not parseable"),
        (b"\xef\xbb\xbf\t" + line("bom-4"), "valid"),
    ],
    # JSON whitespace (space, TAB, CR, LF) around the object is accepted like a space; other
    # control characters are not. A line ending "\r\r" loses one "\r" (its CRLF ending); the
    # other is JSON whitespace.
    "json-whitespace.json": [
        (b"\t" + line("ws-1"), "valid"),
        (b"\r" + line("ws-2"), "valid"),
        (b" \t\r " + line("ws-3") + b" \t", "valid"),
        (line("ws-4") + b"\r\r", "valid"),
        (line("ws-5", event_type="refund") + b"\r\r", "unknown event_type: refund"),
        (b"\x0b" + line("ws-6"), "malformed JSON: not parseable"),
        (b"\x0c" + line("ws-7"), "malformed JSON: not parseable"),
        (b"\t[1, 2]", "not a JSON object: got array"),
        # U+0085 (NEL) is a line terminator to Java's "$", yet neither blank nor JSON.
        (b"\xc2\x85", "malformed JSON: not parseable"),
    ],
    "truncated.json": [
        (line("tr-1")[:40], "malformed JSON: not parseable"),
        (line("tr-2")[:-1], "malformed JSON: not parseable"),
        (b'{"event_id": "tr-3", "event_type": "vi', "malformed JSON: not parseable"),
        (line("tr-4") + b"}", "malformed JSON: not parseable"),
    ],
    "long-line.json": [(line("long-1", note="x" * (10 * 1024 * 1024 + 17)), "valid")],
    "deep-nesting.json": [
        (b"[" * 5000 + b"]" * 5000, "malformed JSON: not parseable"),
        (
            line("deep-1")[:-1] + b', "junk": ' + b'{"a":' * 3000 + b"1" + b"}" * 3000 + b"}",
            "malformed JSON: not parseable",
        ),
        (line("deep-2")[:-1] + b', "junk": ' + b"[" * 50 + b"{}" + b"]" * 50 + b"}", "valid"),
    ],
    "not-objects.json": [
        (b"[1, 2]", "not a JSON object: got array"),
        (b"[]", "not a JSON object: got array"),
        (b'"event"', "not a JSON object: got string"),
        (b"42", "not a JSON object: got number"),
        (b"true", "not a JSON object: got boolean"),
        (b"null", "not a JSON object: got null"),
        (b"[" + line("arr-1") + b"]", "not a JSON object: got array"),
    ],
    "wrong-types.json": [
        (line("wt-1", event_type=True), "event_type must be a string, got boolean"),
        (line("wt-2", user_id=[]), "user_id must be a string, got array"),
        (line("wt-3", product_id={}), "product_id must be a string, got object"),
        (line("wt-4", category=5), "category must be a string, got number"),
        (line("wt-5", event_timestamp=1763632800), "event_timestamp must be a string, got number"),
        (json.dumps(event(event_id=7)).encode(), "event_id must be a string, got number"),
        (line("wt-6", revenue=False), "revenue must be a number, got boolean"),
        (line("wt-7", revenue={"amount": 1}), "revenue must be a number, got object"),
    ],
    "numeric-strings.json": [
        (line("ns-1", revenue="12.50"), "revenue must be a number, got string"),
        (line("ns-2", revenue="1e3"), "revenue must be a number, got string"),
        (line("ns-3", revenue=12.5), "valid"),
        (line("ns-4", event_type="view", revenue=...), "valid"),
    ],
    # Money is DECIMAL(18,4) and never rounded, whatever the notation: a number with an exponent
    # is read from its own digits, not from the double the VARIANT keeps.
    "exponent-revenue.json": [
        (
            line("ex-1").replace(b"1.25", b"1.00000000000000001e0"),
            "revenue does not fit decimal(18,4)",
        ),
        (line("ex-2").replace(b"1.25", b"1e2"), "valid"),
        (line("ex-3").replace(b"1.25", b"1.5e1"), "valid"),
        (line("ex-4").replace(b"1.25", b"12.50"), "valid"),
        (line("ex-5").replace(b"1.25", b"0"), "valid"),
        (line("ex-6").replace(b"1.25", b"1.23456789012345678e13"), "valid"),
        (
            line("ex-7").replace(b"1.25", b"1.0000000000000000000001"),
            "revenue does not fit decimal(18,4)",
        ),
        (line("ex-8").replace(b"1.25", b"1e14"), "revenue does not fit decimal(18,4)"),
        (
            line("ex-9").replace(b'"revenue": 1.25', b'"rev\\u0065nue": 1.00000000000000001e0'),
            "revenue does not fit decimal(18,4)",
        ),
    ],
    "nan-infinity.json": [
        (line("nan-1")[:-1].replace(b"1.25", b"NaN") + b"}", "malformed JSON: not parseable"),
        (line("nan-2").replace(b"1.25", b"Infinity"), "malformed JSON: not parseable"),
        (line("nan-3").replace(b"1.25", b"-Infinity"), "malformed JSON: not parseable"),
        (line("nan-4", revenue="NaN"), "revenue must be a number, got string"),
        (line("nan-5").replace(b"1.25", b"1e400"), "revenue is not a finite number"),
        (line("nan-6").replace(b"1.25", b"-0.0"), "valid"),
    ],
    "no-zone.json": [
        (line("nz-1", event_timestamp="2026-11-20T13:45:12"), "event_timestamp has no time zone"),
        (line("nz-2", event_timestamp="2026-11-20 13:45:12"), "event_timestamp has no time zone"),
        (line("nz-3", event_timestamp="2026-11-20T13:45"), "event_timestamp has no time zone"),
        (line("nz-4", event_timestamp="2026-11-20T13:45:12.5"), "event_timestamp has no time zone"),
        (line("nz-5", event_timestamp="2026-11-20"), "not an ISO-8601 timestamp with a zone"),
        (line("nz-6", event_timestamp="20/11/2026 13:45"), "not an ISO-8601 timestamp with a zone"),
        (line("nz-7", event_timestamp="2026-11-20T13:45:12.123456789+05:30"), "valid"),
    ],
    # Strict ISO-8601: nothing after the zone, not even a line terminator (JSON-escaped inside
    # the string), and zone offsets within -18:00..+18:00 (Java's ZoneOffset).
    "strict-timestamps.json": [
        (
            line("st-1", event_timestamp="2026-11-20T10:00:00Z\n"),
            "event_timestamp is not an ISO-8601 timestamp with a zone",
        ),
        (
            line("st-2", event_timestamp="2026-11-20T10:00:00Z\r"),
            "event_timestamp is not an ISO-8601 timestamp with a zone",
        ),
        (
            line("st-3", event_timestamp="2026-11-20T10:00:00Z\r\n"),
            "event_timestamp is not an ISO-8601 timestamp with a zone",
        ),
        (
            line("st-4", event_timestamp="2026-11-20T10:00:00+19:00"),
            "event_timestamp has a zone offset outside -18:00..+18:00",
        ),
        (
            line("st-5", event_timestamp="2026-11-20T10:00:00-19:00"),
            "event_timestamp has a zone offset outside -18:00..+18:00",
        ),
        (
            line("st-6", event_timestamp="2026-11-20T10:00:00+05:60"),
            "event_timestamp has a zone offset outside -18:00..+18:00",
        ),
        (line("st-7", event_timestamp="2026-11-20T10:00:00+18:00"), "valid"),
        (line("st-8", event_timestamp="2026-11-20T10:00:00-18:00"), "valid"),
    ],
    "far-timestamps.json": [
        (line("far-1", event_timestamp="0001-01-01T00:00:00Z"), "event_timestamp is out of range"),
        (line("far-2", event_timestamp="9999-12-31T23:59:59Z"), "event_timestamp is out of range"),
        (line("far-3", event_timestamp="1899-12-31T23:59:59Z"), "event_timestamp is out of range"),
        (line("far-4", event_timestamp="1900-01-01T00:00:00Z"), "valid"),
        (line("far-5", event_timestamp="2199-12-31T22:59:59.999999Z"), "valid"),
    ],
    "empty.json": [],
    "whitespace-only.json": [],
    "duplicate-keys.json": [
        (
            b'{"event_id": "dk-1", "event_id": "dk-2", "event_type": "view", "user_id": "u", "product_id": "p", "event_timestamp": "2026-11-20T10:00:00Z"}',
            "malformed JSON: duplicate key in object",
        ),
        (line("dk-3")[:-1] + b', "revenue": 2}', "malformed JSON: duplicate key in object"),
        (line("dk-4")[:-1] + b', "extra": {"a": 1, "a": 2}}', "malformed JSON: not parseable"),
    ],
    "many-fields.json": [
        (
            json.dumps(
                {**event(event_id="mf-1"), **{f"extra_{i}": i for i in range(10000)}}
            ).encode(),
            "valid",
        ),
    ],
    "crlf.json": [
        (line("crlf-1"), "valid"),
        (line("crlf-2", event_type="refund"), "unknown event_type: refund"),
    ],
    "missing-fields.json": [
        (
            line("mi-1", user_id=..., product_id=...),
            "missing field: user_id; missing field: product_id",
        ),
        (line("mi-2", event_timestamp=...), "missing field: event_timestamp"),
        (line("mi-3", revenue=...), "purchase without revenue"),
        (b"{}", "missing field: event_id"),
        (line("mi-4", revenue=-3), "revenue is negative"),
        (line("mi-5", revenue=0.00001), "revenue does not fit decimal(18,4)"),
        (
            line(
                "",
            ),
            "event_id is empty",
        ),
    ],
}


# Too large for git and for a workspace's file import (10 MiB): made by the test instead.
MADE_AT_TEST_TIME = ("long-line.json",)


def file_bytes(name: str) -> bytes:
    """The bytes of one corpus file."""
    if name == "whitespace-only.json":
        return b"\n  \n\t\r\n"
    ending = b"\r\n" if name == "crlf.json" else b"\n"
    return b"".join(raw + ending for raw, _ in CASES[name])


def write_made_at_test_time(folder: Path) -> None:
    """Write the files of :data:`MADE_AT_TEST_TIME` into ``folder``."""
    for name in MADE_AT_TEST_TIME:
        (folder / name).write_bytes(file_bytes(name))


def main() -> None:
    HERE.mkdir(exist_ok=True)
    for name in CASES:
        if name not in MADE_AT_TEST_TIME:
            (HERE / name).write_bytes(file_bytes(name))
    expected = {name: [outcome for _, outcome in cases] for name, cases in CASES.items()}
    (HERE / "EXPECTED.json").write_text(json.dumps(expected, indent=1) + "\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""An independent reference of the audit chain's canonical encoding (docs/architecture.md#the-audit-chain).

Writes tests/vectors/audit-v1.jsonl (a chain in the export format, `details` deliberately not in
canonical form) and tests/vectors/canonical-json.jsonl (details text -> canonical text). The C++
core, the extension (regress/audit.sql), the SQLite shim and the offline verifier must all
reproduce these hashes; this script shares no code with them.

    python3 tests/vectors/make_vectors.py   # rewrites both files
"""
import decimal
import hashlib
import json
import os
import struct
import uuid
from datetime import datetime, timezone

HERE = os.path.dirname(os.path.abspath(__file__))


def canonical_number(lexeme):
    d = decimal.Decimal(lexeme)
    if d.is_zero():
        return "0"
    sign, digits, exponent = d.normalize(decimal.Context(prec=10000)).as_tuple()
    text = "".join(map(str, digits))
    if exponent >= 0:
        text += "0" * exponent
    elif len(text) > -exponent:
        text = text[:exponent] + "." + text[exponent:]
    else:
        text = "0." + "0" * (-exponent - len(text)) + text
    return ("-" if sign else "") + text


def quote(s):
    out = ['"']
    for ch in s:
        c = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch in "\b\f\n\r\t":
            out.append({"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch])
        elif c < 0x20:
            out.append("\\u%04x" % c)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


class Number(str):
    """A number kept as its lexeme."""


def canonical(value):
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, Number):
        return canonical_number(value)
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, list):
        return "[" + ",".join(canonical(v) for v in value) + "]"
    items = sorted(value.items(), key=lambda kv: kv[0].encode("utf-8"))
    return "{" + ",".join(quote(k) + ":" + canonical(v) for k, v in items) + "}"


def parse(text):
    # Repeated keys keep the last value (dict assignment), as jsonb does.
    return json.loads(text, parse_float=Number, parse_int=Number)


def usecs(ts):
    dt = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    delta = dt - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def field(data):
    return struct.pack(">I", len(data)) + data


def optional(data):
    return b"\x00" if data is None else b"\x01" + field(data)


def encoding(e):
    details = None if e["details"] is None else canonical(e["details"]).encode("utf-8")
    digest = None if e["payload_digest"] is None else bytes.fromhex(e["payload_digest"])
    ref = None if e["payload_ref"] is None else e["payload_ref"].encode("utf-8")
    return (b"forgeyard.audit.v1\x00" + field(e["tenant"].encode("utf-8")) + struct.pack(">q", e["seq"]) +
            field(uuid.UUID(e["event_id"]).bytes) + struct.pack(">q", usecs(e["occurred_at"])) +
            struct.pack(">q", usecs(e["recorded_at"])) + field(e["actor"].encode("utf-8")) +
            field(e["action"].encode("utf-8")) + field(e["resource"].encode("utf-8")) + optional(details) +
            optional(digest) + optional(ref))


EVENTS = [
    dict(event_id="00000000-0000-4000-8000-000000000001", occurred_at="2026-11-29T12:00:00.000000Z",
         recorded_at="2026-11-29T12:00:00.000000Z", actor="alice", action="release.promote", resource="svc/api",
         details='{"to": "prod", "from": "staging", "canary": 1.50, "replicas": 3E0}',
         payload_digest=None, payload_ref=None),
    dict(event_id="00000000-0000-4000-8000-000000000002", occurred_at="2026-11-28T23:59:59.999999Z",
         recorded_at="2026-11-29T12:00:00.000001Z", actor="ci-bot", action="artifact.store", resource="build/4711",
         details=None, payload_digest=hashlib.sha256(b"artifact bytes").hexdigest(),
         payload_ref="cas://sha256/" + hashlib.sha256(b"artifact bytes").hexdigest()),
    dict(event_id="00000000-0000-4000-8000-000000000003", occurred_at="1999-12-31T23:59:59.5Z",
         recorded_at="2026-11-29T12:00:01.000000Z", actor="bob \u00e9\u00e8", action="policy.change",
         resource="policy/\u2603",
         details='{"b": {"y": [1, 2.0, -0, 1e-3, 12345678901234567890.123456789000], "x": null}, '
                 '"a": "line\\nbreak \\"quoted\\" \\u00e9 \\ud83d\\ude00 tab\\t", "\u00e9": true, "Z": false, '
                 '"a\\u0001": []}',
         payload_digest=None, payload_ref=None),
    dict(event_id="00000000-0000-4000-8000-000000000004", occurred_at="2026-11-29T12:00:02.000000Z",
         recorded_at="2026-11-29T12:00:02.000000Z", actor="alice", action="release.rollback", resource="svc/api",
         details='{"dup": 1, "dup": 2, "nested": {"k": {}}}', payload_digest="00ff", payload_ref=None),
    dict(event_id="00000000-0000-4000-8000-000000000005", occurred_at="2026-11-29T12:00:03.000000Z",
         recorded_at="2026-11-29T12:00:03.000000Z", actor="a", action="b", resource="c",
         details="{}", payload_digest=None, payload_ref=None),
]

CANONICAL = [
    '{}', '{"b":1,"a":2}', '{"n":1.0}', '{"n":1.50}', '{"n":1e2}', '{"n":1E+2}', '{"n":-0}', '{"n":-0.0e5}',
    '{"n":0.000123}', '{"n":123e-5}', '{"n":-12.340e1}', '{"n":100}', '{"n":1e-7}',
    '{"n":98765432109876543210.01234567890}', '{ "s" : "a\\/b" }', '{"s":"\\u00e9"}', '{"s":"\u00e9"}',
    '{"s":"\\ud83d\\ude00"}', '{"s":"\\u001f\\u007f"}', '{"s":"\\b\\f\\n\\r\\t"}', '{"k":1,"k":2}',
    '{"\u00e9":1,"z":2,"Z":3,"a":4,"":5}', '{"a":[3,1,{"c":1,"b":2}],"b":[true,false,null]}',
]


def main():
    prev = bytes(32)
    with open(os.path.join(HERE, "audit-v1.jsonl"), "w", encoding="utf-8") as out:
        for seq, spec in enumerate(EVENTS, start=1):
            e = dict(spec, tenant="vector-tenant", seq=seq)
            details = None if e["details"] is None else parse(e["details"])
            h = hashlib.sha256(encoding(dict(e, details=details)) + prev).digest()
            line = ('{"tenant":%s,"seq":%d,"event_id":"%s","occurred_at":"%s","recorded_at":"%s","actor":%s,'
                    '"action":%s,"resource":%s,"details":%s,"payload_digest":%s,"payload_ref":%s,'
                    '"prev_hash":"%s","hash":"%s"}') % (
                json.dumps(e["tenant"]), seq, e["event_id"], e["occurred_at"], e["recorded_at"],
                json.dumps(e["actor"], ensure_ascii=False), json.dumps(e["action"]), json.dumps(e["resource"], ensure_ascii=False),
                "null" if e["details"] is None else e["details"],
                "null" if e["payload_digest"] is None else '"%s"' % e["payload_digest"],
                "null" if e["payload_ref"] is None else json.dumps(e["payload_ref"]),
                prev.hex(), h.hex())
            out.write(line + "\n")
            prev = h
    with open(os.path.join(HERE, "canonical-json.jsonl"), "w", encoding="utf-8") as out:
        for text in CANONICAL:
            out.write(json.dumps({"input": text, "canonical": canonical(parse(text))}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()

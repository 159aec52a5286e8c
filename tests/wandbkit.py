"""A minimal encoder of wandb's Record messages and writer of its LevelDB-log framing
(wandb/sdk/internal/datastore.py), checked byte for byte against wandb's own output in
test_frameworks_wandb_offline.py."""

from __future__ import annotations

import struct
import zlib

from rlagent.tools.frameworks.wandb_offline import BLOCK, HEADER


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def history_record(num: int, items: dict[str, str], step: int) -> bytes:
    body = b"".join(field(1, field(2, key.encode()) + field(16, value.encode())) for key, value in items.items())
    body += field(2, varint(1 << 3) + varint(step))
    return varint(1 << 3) + varint(num) + field(2, body)


def frame(payloads: list[bytes]) -> bytes:
    out = bytearray(HEADER)
    for payload in payloads:
        first = True
        while True:
            left = BLOCK - len(out) % BLOCK
            if left < 7:
                out += b"\x00" * left
                continue
            chunk = payload[: left - 7]
            payload = payload[len(chunk) :]
            kind = (1 if first else 4) if not payload else (2 if first else 3)
            out += struct.pack("<IHB", zlib.crc32(chunk, zlib.crc32(bytes([kind]))), len(chunk), kind) + chunk
            first = False
            if not payload:
                break
    return bytes(out)

"""The bloom filter of the SQL92 filter bit-map (upstream org.apache.rocketmq.filter.util
BloomFilter and BitsArray), pure: no I/O.

Every SQL92 filter (a group's subscription of a topic) owns ``k`` bit positions out of ``m``,
computed from the text ``"<group>#<topic>"``. When a record is dispatched, the positions of
every filter of its topic that matches it are set in an ``m``-bit map stored with the record's
ConsumeQueue entry (storage/cq_ext.py). A pull then needs only the map: if one of its filter's
positions is clear, the filter did not match the record. Filters that share positions make
"maybe" answers (false positives, at most ``f`` % with ``n`` filters per topic), never a false
"no".

Sizes are upstream's: ``k = ceil(log_0.5(f / 100))``, ``m = ceil(n * log2(100 / f) * log2(e))``
rounded up to whole bytes; with upstream's defaults (maxErrorRateOfBloomFilter = 20,
expectConsumerNumUseFilter = 32) k = 3 and m = 112 (bitMapLengthConsumeQueueExt). Positions come
from Guava's murmur3_128 of the UTF-8 text (its first 8 bytes as a little-endian long) split into
two 32-bit hashes, as upstream's ``calcBitPositions``, so the bits equal a Java broker's
(tests/unit/actors/broker/dispatch/test_bloom.py checks values a Java run printed). Bit ``i`` is
``byte[i // 8] & (1 << i % 8)`` (upstream BitsArray); a map is tested by storage/cq_ext.py's
`bits_hit`.
"""

from __future__ import annotations

import math

import attrs

from rocketrio.actors.broker.boot.config import BrokerConfig

_M64 = (1 << 64) - 1
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _M64
    return k ^ (k >> 33)


def murmur3_128_h1(data: bytes) -> int:
    """The first 64 bits (h1, unsigned) of MurmurHash3_x64_128 with seed 0: what Guava's
    ``Hashing.murmur3_128().hashBytes(data).asLong()`` returns (as a signed long)."""
    h1 = h2 = 0
    n = len(data)
    full = n - n % 16
    for i in range(0, full, 16):
        k1 = int.from_bytes(data[i : i + 8], "little")
        k2 = int.from_bytes(data[i + 8 : i + 16], "little")
        h1 ^= _rotl((k1 * _C1) & _M64, 31) * _C2 & _M64
        h1 = (_rotl(h1, 27) + h2) & _M64
        h1 = (h1 * 5 + 0x52DCE729) & _M64
        h2 ^= _rotl((k2 * _C2) & _M64, 33) * _C1 & _M64
        h2 = (_rotl(h2, 31) + h1) & _M64
        h2 = (h2 * 5 + 0x38495AB5) & _M64
    tail = data[full:]
    if len(tail) > 8:
        k2 = int.from_bytes(tail[8:], "little")
        h2 ^= _rotl((k2 * _C2) & _M64, 33) * _C1 & _M64
    if tail:
        k1 = int.from_bytes(tail[:8], "little")
        h1 ^= _rotl((k1 * _C1) & _M64, 31) * _C2 & _M64
    h1 ^= n
    h2 ^= n
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    h1 = _fmix(h1)
    h2 = _fmix(h2)
    return (h1 + h2) & _M64


def _int32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


@attrs.frozen
class BloomFilter:
    """Upstream's BloomFilter.createByFn(f, n): ``k`` positions out of ``m`` bits."""

    f: int
    n: int
    k: int
    m: int

    @classmethod
    def create_by_fn(cls, f: int, n: int) -> BloomFilter:
        """``f``: the error rate in percent (1..99); ``n``: the filters expected per topic."""
        if not 1 <= f < 100:
            raise ValueError(f"maxErrorRateOfBloomFilter must be in [1, 100), got {f}")
        if n < 1:
            raise ValueError(f"expectConsumerNumUseFilter must be at least 1, got {n}")
        rate = f / 100.0
        k = math.ceil(math.log(rate) / math.log(0.5))
        m = math.ceil(n * (math.log(1 / rate) / math.log(2)) * (math.log(math.e) / math.log(2)))
        m = 8 * math.ceil(m / 8.0)
        return cls(f, n, k, m)

    @property
    def byte_length(self) -> int:
        return self.m // 8

    def bit_positions(self, text: str) -> tuple[int, ...]:
        """Upstream calcBitPositions: ``k`` positions in [0, m) for ``text``."""
        h64 = murmur3_128_h1(text.encode("utf-8"))
        hash1, hash2 = _int32(h64), _int32(h64 >> 32)
        out = []
        for i in range(1, self.k + 1):
            combined = _int32(hash1 + i * hash2)
            if combined < 0:
                combined = ~combined
            out.append(combined % self.m)
        return tuple(out)

    def positions_of(self, group: str, topic: str) -> tuple[int, ...]:
        """The positions of a group's filter of a topic (upstream: ``group + "#" + topic``)."""
        return self.bit_positions(f"{group}#{topic}")


def filter_bloom(config: BrokerConfig) -> BloomFilter:
    """The broker's bloom filter (upstream ConsumerFilterManager's constructor)."""
    return BloomFilter.create_by_fn(
        config.maxErrorRateOfBloomFilter, config.expectConsumerNumUseFilter
    )


def set_bits(bitmap: bytearray, positions: tuple[int, ...]) -> None:
    """Upstream hashTo: set ``positions`` in ``bitmap``."""
    for p in positions:
        bitmap[p >> 3] |= 1 << (p & 7)

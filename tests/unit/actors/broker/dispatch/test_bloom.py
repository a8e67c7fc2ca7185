"""The bit-map's bloom filter (actors/broker/dispatch/bloom.py), pure: sizes and bit positions
equal upstream's (values printed by a Java 17 run of rocketmq-filter-5.2.0's BloomFilter), bits
set where upstream's BitsArray sets them, and a map answers "maybe" for every filter that
matched (no false "no")."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.actors.broker.dispatch.bloom import BloomFilter, murmur3_128_h1, set_bits
from rocketrio.storage.cq_ext import bits_hit

# BloomFilter.createByFn(20, 32).calcBitPositions(s), Java 17, rocketmq-filter-5.2.0.jar
JAVA_20_32 = {
    "cg#Orders": (98, 8, 83),
    "g1#t": (32, 7, 17),
    "": (0, 0, 0),
    "grüße#topic": (75, 22, 8),
    "CID_a#%RETRY%x": (86, 20, 77),
}


def test_upstream_defaults_give_3_hashes_over_112_bits() -> None:
    bloom = BloomFilter.create_by_fn(20, 32)  # maxErrorRateOfBloomFilter, expectConsumerNum...
    assert (bloom.k, bloom.m, bloom.byte_length) == (3, 112, 14)
    other = BloomFilter.create_by_fn(10, 64)
    assert (other.k, other.m) == (4, 312)


def test_bit_positions_equal_upstreams() -> None:
    bloom = BloomFilter.create_by_fn(20, 32)
    for text, want in JAVA_20_32.items():
        assert bloom.bit_positions(text) == want, text
    assert bloom.positions_of("cg", "Orders") == JAVA_20_32["cg#Orders"]
    assert BloomFilter.create_by_fn(10, 64).bit_positions("cg#Orders") == (218, 0, 275, 238)


def test_murmur3_equals_guavas() -> None:
    # Long.toUnsignedString(Hashing.murmur3_128().hashString(s, UTF_8).asLong(), 16), Java 17,
    # guava-32.0.1 (a 20-byte text takes the 16-byte block and the tail paths)
    assert murmur3_128_h1(b"") == 0
    assert murmur3_128_h1(b"hello") == 0xCBD8A7B341BD9B02
    assert murmur3_128_h1(b"0123456789abcdef0123") == 0x8047058142D9440A


def test_bad_sizes_are_refused_by_key_name() -> None:
    for f, n, key in ((0, 32, "maxErrorRate"), (100, 32, "maxErrorRate"), (20, 0, "expectCons")):
        try:
            BloomFilter.create_by_fn(f, n)
        except ValueError as e:
            assert key in str(e)
        else:
            raise AssertionError((f, n))


def test_bits_land_where_upstreams_bits_array_puts_them() -> None:
    bits = bytearray(14)
    set_bits(bits, (0, 9, 111))
    assert bits[0] == 0b1 and bits[1] == 0b10 and bits[13] == 0b1000_0000
    assert bits_hit(bytes(bits), (0, 9)) and not bits_hit(bytes(bits), (0, 10))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=12), min_size=1, max_size=40), st.data())
def test_a_matched_filter_is_always_a_hit(names: list[str], data: st.DataObject) -> None:
    bloom = BloomFilter.create_by_fn(20, 32)
    matched = data.draw(st.lists(st.sampled_from(names), max_size=len(names)))
    bits = bytearray(bloom.byte_length)
    for name in matched:
        set_bits(bits, bloom.bit_positions(name))
    assert all(bits_hit(bytes(bits), bloom.bit_positions(name)) for name in matched)

"""Compiled decoders for the ROCKETMQ header's extFields (sans-io): the hot path of a Java
client's SEND_MESSAGE_V2 (13 one-letter fields).

A producer sends the same header shape again and again: the same keys in the same order, and
mostly the same value lengths (a 13-digit bornTimestamp, a 32-hex UNIQ_KEY, one-digit queue
ids). `ExtLayouts` remembers such a shape, once it has been seen twice, as one regular
expression of the whole extFields: each entry's key-length short, key and value-length int as
literal characters and its value as a group of exactly that many ASCII characters. A header
that matches is decoded by that one C call (``fullmatch`` on the header's latin-1 text), its
dict zipped from the keys and the groups.

Why the result is the generic decoder's (``remoting._decode_ext_fields``, a test checks it on
random headers): the expression matches exactly the byte strings made of those entries with
values of those lengths, whose generic decode is the keys (distinct: they come from a dict)
zipped with the values; the values are ASCII (the character class), so their latin-1 text is
their UTF-8 text. Anything else (a new shape, a non-ASCII value) misses and is decoded the
generic way, which then offers the shape back (`learn`).

Bounded: at most ``max_layouts`` expressions (the newest first, a hit moves to the front) and
``max_tries`` tried per header; a shape is compiled only on its second sighting among the last
``max_seen`` shapes, so headers whose shape never repeats cost a dict look-up each, no compile.
"""

from __future__ import annotations

import re
import struct

_I16 = struct.Struct(">h").pack
_I32 = struct.Struct(">i").pack

Shape = tuple[tuple[str, ...], tuple[int, ...]]  # keys, value lengths (bytes = chars: ASCII)


def shape_pattern(keys: tuple[str, ...], lengths: tuple[int, ...]) -> re.Pattern[str]:
    """The expression matching exactly the extFields of ``keys`` with values of ``lengths``
    ASCII characters, on the latin-1 text of the header (one character per byte)."""
    parts: list[str] = []
    for key, n in zip(keys, lengths, strict=True):
        kb = key.encode()
        prefix = _I16(len(kb)) + kb + _I32(n)
        parts.append(re.escape(prefix.decode("latin-1")))
        parts.append(f"([\\x00-\\x7f]{{{n}}})")
    return re.compile("".join(parts), re.DOTALL)


class ExtLayouts:
    """Recently seen extFields shapes, compiled (see the module docstring).

    Process-wide and shared by decoders on other threads (the proxy's loop): the list of
    layouts is never changed in place, only replaced, so a reader holds a consistent one; a
    lost update between threads costs a miss, never a wrong decode.
    """

    def __init__(self, max_layouts: int = 8, max_tries: int = 4, max_seen: int = 256) -> None:
        self._layouts: list[tuple[re.Pattern[str], tuple[str, ...], Shape]] = []
        self._seen: dict[Shape, int] = {}
        self._max_layouts = max_layouts
        self._max_tries = max_tries
        self._max_seen = max_seen

    def __len__(self) -> int:
        return len(self._layouts)

    def match(self, text: str, pos: int, end: int) -> dict[str, str] | None:
        """The extFields in ``text[pos:end]`` if a remembered shape fits them, else None."""
        layouts = self._layouts
        for i in range(min(len(layouts), self._max_tries)):
            pattern, keys, _ = layouts[i]
            m = pattern.fullmatch(text, pos, end)
            if m is not None:
                if i:  # to the front, in a new list (see the class docstring)
                    self._layouts = [layouts[i], *layouts[:i], *layouts[i + 1 :]]
                return dict(zip(keys, m.groups(), strict=True))
        return None

    def learn(self, ext: dict[str, str]) -> None:
        """Offer the shape of extFields the generic decoder read, all of them ASCII."""
        if len(ext) < 4:  # a short header decodes fast enough the generic way
            return
        keys = tuple(ext)
        lengths = tuple(map(len, ext.values()))
        shape = (keys, lengths)
        seen = self._seen
        count = seen.get(shape, 0) + 1
        if count < 2:
            if len(seen) >= self._max_seen:
                seen.clear()
            seen[shape] = count
            return
        seen.pop(shape, None)
        layouts = [one for one in self._layouts if one[2] != shape]  # one not tried lately
        layouts.insert(0, (shape_pattern(keys, lengths), keys, shape))
        del layouts[self._max_layouts :]
        self._layouts = layouts

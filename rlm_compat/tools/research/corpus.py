"""Deterministic text for task corpora: seeded draws, filler prose, exact-size assembly, hashes.

A corpus must be byte-identical for the same seed on every Python the project supports (3.10 to
3.13), or two machines comparing results would grade different documents. So only Mersenne Twister
*raw output* is used — ``getrandbits`` and ``randbytes``, whose results have not changed across
those versions — and every derived draw (a bounded integer, a choice) is computed here, never by
``randrange`` / ``choice`` / ``shuffle``, whose algorithms are free to change.

Speed matters as much: a 10 M character corpus is built in about a second, so filler is drawn in
bulk (one ``randbytes`` call, one byte per word) instead of word by word.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from collections.abc import Sequence

__all__ = [
    "FILLER_WORDS",
    "assemble",
    "below",
    "derive_rng",
    "filler",
    "number_words",
    "pick",
    "sha256_text",
]

# 256 plain words (one per byte value). None of them is a word the task patterns search for
# ("code", "key", "leads", "holds", "value", "visitors", "counted", number words...), so filler can
# never create a false match.
_FILLER_TEXT = """
    about above across after again against almost along already also always among animal answer
    apple april area army around art autumn avenue away baby back badge bag ball band bank barn
    basket beach bean bear bed before begin behind bell below bench berry between bicycle bird
    blanket blue board boat body book border bottle bottom bowl box branch bread bridge bright
    brother brown brush bucket builder busy butter button cabin cable cake calm camera camp candle
    canvas captain card careful carpet carrot castle cat ceiling chair chalk cheese cherry chicken
    church circle city clean clever cliff clock cloud coast coffee collar colour copper corner
    cotton country cousin cover cow cradle crane cream crowd cup curtain cushion dance daughter
    desert diamond dinner distant doctor dog donkey door dragon drawer dream dress drum duck dust
    eagle early earth east easy edge engine evening fabric face factory farmer feather fence field
    finger fire fish flag flower fog forest fork fountain fox friend frost fruit garden gate gentle
    giant glass glove goat gold grain grape grass green guitar hammer harbor hat hill honey horse
    house island jacket jelly kettle kitchen kite ladder lake lamp lantern leaf lemon letter library
    lion little map market meadow melon metal milk mirror monkey moon morning mountain mouse music
    narrow needle nest night noble north ocean olive orange orchard owl paint palace paper parcel
    path pencil pepper piano picnic pillow pilot planet plate pocket pond potato purple quiet rabbit
    rain river road rocket roof rose sail salt sand school shadow sheep shell shore silver sister
    sky slow small snow soap soft south spoon spring square stone storm street sugar summer sun
    table teacher thunder tiger timber tomato tower train tree valley village violin wagon wall
    water west wheat wheel window winter wolf wood wool yellow young
"""
FILLER_WORDS: tuple[str, ...] = tuple(_FILLER_TEXT.split())

_ONES = (
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
)
_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")


def derive_rng(*parts: object) -> random.Random:
    """A generator seeded from ``parts`` through SHA-256, so ("needle", 10_000, 0) and
    ("needle", 10_000, 1) give unrelated streams and no seed collides with another kind's."""
    text = "\x1f".join(str(p) for p in ("rlm_compat.research", *parts))
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest, "big"))


def below(rng: random.Random, n: int) -> int:
    """A uniform integer in ``[0, n)`` by rejection on ``getrandbits`` (version-stable)."""
    if n <= 0:
        raise ValueError(f"below() needs a positive bound, not {n}")
    bits = n.bit_length()
    while True:
        value = rng.getrandbits(bits)
        if value < n:
            return value


def pick(rng: random.Random, items: Sequence[str]) -> str:
    """One of ``items``, uniformly."""
    return items[below(rng, len(items))]


def number_words(n: int) -> str:
    """English words for 0..99 (``forty-two``), as the combine task writes its counts."""
    if not 0 <= n <= 99:
        raise ValueError(f"number_words covers 0..99, not {n}")
    if n < 20:
        return _ONES[n]
    tens, ones = divmod(n, 10)
    return _TENS[tens] + ("" if ones == 0 else "-" + _ONES[ones])


def filler(rng: random.Random, chars: int) -> str:
    """Prose-like lines of filler words, exactly ``chars`` characters, ending in a newline
    (when ``chars`` > 0). Lines hold 6 to 17 words; the last line is cut to fit."""
    if chars <= 0:
        return ""
    words = max(16, chars // 5)  # average word plus space is about 6.3 characters
    pieces: list[str] = []
    total = 0
    while total < chars:
        drawn = [FILLER_WORDS[b] for b in rng.randbytes(words)]
        lengths = rng.randbytes(words // 6 + 1)
        start = 0
        for length in lengths:
            step = 6 + length % 12
            if start + step > len(drawn):
                break
            line = " ".join(drawn[start : start + step])
            line = line[0].upper() + line[1:] + ".\n"
            pieces.append(line)
            total += len(line)
            start += step
            if total >= chars:
                break
    text = "".join(pieces)[:chars]
    return text[:-1] + "\n"


def assemble(rng: random.Random, planted: Sequence[str], size: int) -> str:
    """``planted`` lines (each ending in a newline) spread over filler, exactly ``size`` characters.

    Planted lines keep their order and always start at a line start, so a line-oriented search
    finds each one whole; the filler around them is drawn from ``rng`` after the positions.
    """
    planted_chars = sum(len(line) for line in planted)
    if any(not line.endswith("\n") or "\n" in line[:-1] for line in planted):
        raise ValueError("planted lines must be single lines ending in a newline")
    if planted_chars > size:
        raise ValueError(f"{planted_chars} planted characters do not fit in a {size}-character corpus")
    text = filler(rng, size - planted_chars)
    starts = [0]
    position = text.find("\n")
    while position != -1:
        starts.append(position + 1)
        position = text.find("\n", position + 1)
    # distinct line starts, in order: one random draw per planted line into its own stretch
    slots = _spread(rng, len(starts), len(planted))
    pieces: list[str] = []
    previous = 0
    for line, slot in zip(planted, slots, strict=True):
        cut = starts[slot]
        pieces.append(text[previous:cut])
        pieces.append(line)
        previous = cut
    pieces.append(text[previous:])
    return "".join(pieces)


def _spread(rng: random.Random, slots: int, count: int) -> list[int]:
    """``count`` non-decreasing slot indices, each drawn uniformly in its share of ``slots``."""
    if count == 0:
        return []
    bounds = [slots * i // count for i in range(count + 1)]
    # with fewer slots than lines a share is empty: that line shares its neighbour's slot
    return [min(lo + below(rng, max(1, hi - lo)), slots - 1) for lo, hi in itertools.pairwise(bounds)]


def sha256_text(text: str) -> str:
    """The corpus identity: SHA-256 of its UTF-8 bytes, hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()

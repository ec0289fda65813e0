"""Task corpora, exact graders and suites of rlm_compat.tools.research.

The answer keys are checked against the context by independent parsing (not the generator's own
bookkeeping), so a generator bug that made the key disagree with the text fails here.
"""

from __future__ import annotations

import re

import pytest
from examples import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlm_compat.tools import ToolUsageError
from rlm_compat.tools.research.base import Grader, Suite, TaskInstance, TaskSpec
from rlm_compat.tools.research.corpus import (
    FILLER_WORDS,
    assemble,
    derive_rng,
    filler,
    number_words,
    sha256_text,
)
from rlm_compat.tools.research.graders import (
    ExactInteger,
    ExactText,
    NumericScore,
    PairsF1,
    normalise_answer,
    parse_pairs,
)
from rlm_compat.tools.research.paper_tasks import LABELS, PAPER_SIZES
from rlm_compat.tools.research.suites import OUR_KINDS, PAPER_KINDS, SUITES, TURN_KINDS, load_suite
from rlm_compat.tools.research.tasks import KINDS, MIN_SIZE, SIZES, GeneratedTask, _build, task_from_id

KIND_NAMES = sorted(KINDS)
SMALL = st.integers(min_value=MIN_SIZE, max_value=40_000)
SEEDS = st.integers(min_value=0, max_value=2**40)


def fresh(kind: str, size: int, seed: int) -> TaskInstance:
    """Generate without the per-process cache, so two calls really generate twice."""
    return _build.__wrapped__(kind, size, seed).instance


# --- corpora ------------------------------------------------------------------------------------


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(KIND_NAMES), size=SMALL, seed=SEEDS)
def test_same_seed_same_bytes_exact_size_and_hash(kind: str, size: int, seed: int) -> None:
    first, second = fresh(kind, size, seed), fresh(kind, size, seed)
    assert first == second
    assert len(first.context) == size
    assert first.corpus_sha256 == sha256_text(first.context)
    assert (first.kind, first.size, first.seed) == (kind, size, seed)


@settings(max_examples=examples(25), deadline=None)
@given(kind=st.sampled_from(KIND_NAMES), size=SMALL, seed=SEEDS)
def test_different_seeds_different_corpora(kind: str, size: int, seed: int) -> None:
    one, other = fresh(kind, size, seed), fresh(kind, size, seed + 1)
    assert one.context != other.context
    assert one.corpus_sha256 != other.corpus_sha256


@pytest.mark.parametrize("label", list(SIZES))
def test_standard_sizes_are_exact(label: str) -> None:
    for kind in OUR_KINDS:
        instance = GeneratedTask(kind, SIZES[label], 0).build()
        assert len(instance.context) == SIZES[label]
        assert instance.task_id == f"{kind}-{label}-s0"


# Pinned identities of the standard suite: the same bytes on every Python the project supports
# (3.10, 3.11, 3.12 and 3.13 were checked when these were recorded). A change is a new suite version.
GOLDEN = {
    "needle-10k-s0": "088cb7cca7601a8b",
    "needle-100k-s0": "e633927aba2b5ed1",
    "needle-1m-s0": "21307fb7c67d4bb7",
    "needle-10m-s0": "7e0d1929243b9640",
    "aggregate-10k-s0": "f618551edfab5f29",
    "aggregate-100k-s0": "6a3cea27d31da97b",
    "aggregate-1m-s0": "b0db348f93ac02f3",
    "aggregate-10m-s0": "74eb1a4a118301c9",
    "multihop-10k-s0": "1c267a4bb1e30e53",
    "multihop-100k-s0": "cdd660464e3310ad",
    "multihop-1m-s0": "162187bd55849246",
    "multihop-10m-s0": "065abde39665a242",
    "combine-10k-s0": "65b03a9df80b0596",
    "combine-100k-s0": "28c3b4666a873485",
    "combine-1m-s0": "9a5e94b31eb69227",
    "combine-10m-s0": "7e39b072d18b3d68",
}


def test_corpora_are_pinned_across_python_versions() -> None:
    found = {
        spec.task_id: fresh(spec.kind, spec.size, spec.seed).corpus_sha256[:16]
        for spec in load_suite("standard").tasks()
    }
    assert found == GOLDEN


# The paper-style suite's corpora, pinned the same way (3.10 - 3.13 checked when recorded).
PAPER_GOLDEN = {
    "sniah-2^13t-s0": "b4f0aa014d0f1df5",
    "sniah-2^14t-s0": "aa52b530ac98abfd",
    "sniah-2^15t-s0": "7ed9edd0fbf21425",
    "sniah-2^16t-s0": "25008c9b6b264429",
    "oolong-2^13t-s0": "efa75f57a099814e",
    "oolong-2^14t-s0": "953b5fa34027580e",
    "oolong-2^15t-s0": "a2603b5e57288e5d",
    "oolong-2^16t-s0": "9f002034c317358f",
    "pairs-2^13t-s0": "53fa24979cf45d66",
    "pairs-2^14t-s0": "e4c40bd5b8964eae",
    "pairs-2^15t-s0": "b64c1f6a0c13721b",
    "pairs-2^16t-s0": "25a11c1059deef15",
}


def test_paper_corpora_are_pinned_across_python_versions() -> None:
    found = {
        spec.task_id: fresh(spec.kind, spec.size, spec.seed).corpus_sha256[:16]
        for spec in load_suite("paper").tasks()
        if spec.size <= PAPER_SIZES["2^16t"]
    }
    assert found == PAPER_GOLDEN


def test_paper_sizes_are_the_papers_token_counts() -> None:
    assert PAPER_SIZES["2^13t"] == 4 * 8_192 and PAPER_SIZES["2^18t"] == 4 * 262_144
    suite = load_suite("paper")
    assert {s.size for s in suite.tasks()} == {4 * 2**n for n in range(13, 19)}
    assert task_from_id("oolong-2^17t-s3") == GeneratedTask("oolong", 4 * 2**17, 3)
    assert [s.task_id for s in load_suite("paper-smoke").tasks()] == [
        "sniah-2^13t-s0",
        "oolong-2^13t-s0",
        "pairs-2^13t-s0",
    ]


def test_filler_and_assembly_primitives() -> None:
    text = filler(derive_rng("t"), 5_000)
    assert len(text) == 5_000 and text.endswith("\n")
    assert set(text.replace("\n", " ").replace(".", " ").lower().split()) <= set(FILLER_WORDS)
    planted = [f"planted line {i}\n" for i in range(30)]
    doc = assemble(derive_rng("t"), planted, 3_000)
    assert len(doc) == 3_000
    lines = doc.splitlines(keepends=True)
    assert [line for line in lines if line.startswith("planted")] == planted  # whole lines, in order
    with pytest.raises(ValueError, match="do not fit"):
        assemble(derive_rng("t"), planted, 100)
    assert [number_words(n) for n in (0, 7, 19, 20, 42, 99)] == [
        "zero",
        "seven",
        "nineteen",
        "twenty",
        "forty-two",
        "ninety-nine",
    ]


# --- answer keys agree with the text ---------------------------------------------------------


def _solve_independently(instance: TaskInstance) -> str:
    context, query = instance.context, instance.query
    if instance.kind == "needle":
        name = re.search(r"code for (.+?)\?", query).group(1)  # type: ignore[union-attr]
        codes = re.findall(r"secret code for " + re.escape(name) + r" is (\w+)\.", context)
        assert len(codes) == 1, codes
        return str(codes[0])
    if instance.kind == "aggregate":
        region, status = re.search(r"region=(\w+) and status=(\w+)", query).groups()  # type: ignore[union-attr]
        total = 0
        for line in context.splitlines():
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            if fields.get("region") == region and fields.get("status") == status:
                total += int(fields["qty"])
        return str(total)
    if instance.kind == "multihop":
        links = dict(re.findall(r"key (K-\d+) leads to key (K-\d+)", context))
        values = dict(re.findall(r"key (K-\d+) holds the value (\S+)\.", context))
        key = re.search(r"Start at key (K-\d+)", query).group(1)  # type: ignore[union-attr]
        hops = 0
        while key in links:
            key, hops = links[key], hops + 1
        assert hops >= 2, "the start key must need several hops"
        return values[key]
    if instance.kind == "sniah":
        key = query.split("magic number for ", 1)[1].split(" ", 1)[0]
        hits = [line for line in context.splitlines() if line.startswith("One of the special magic")]
        assert len(hits) == 1 and f" for {key} is: " in hits[0], hits
        return hits[0].rsplit(" ", 1)[1].rstrip(".")
    if instance.kind in ("oolong", "pairs"):
        records = [
            dict(field.split(": ", 1) for field in line.split(" || "))
            for line in context.splitlines()
            if line.startswith("Date: ")
        ]
        assert records and all(r["Label"] in LABELS for r in records)
        label = query.split("label '", 1)[1].split("'", 1)[0]
        if instance.kind == "oolong":
            month = query.split("dated in ", 1)[1][:7]
            return str(sum(1 for r in records if r["Date"][:7] == month and r["Label"] == label))
        users = sorted({int(r["User"]) for r in records if r["Label"] == label})
        assert 2 <= len(users) < len({r["User"] for r in records}), "neither no pairs nor every user"
        return "\n".join(f"({a}, {b})" for i, a in enumerate(users) for b in users[i + 1 :])
    assert instance.kind == "combine"
    words = {number_words(n): n for n in range(100)}
    found = re.findall(r"Incident report IR-\d+: .*? (?:counted|logged) (\S+) visitors", context)
    assert found and len(found) == context.count("Incident report")
    return str(sum(words[w] for w in found))


@settings(max_examples=examples(30), deadline=None)
@given(kind=st.sampled_from(KIND_NAMES), size=SMALL, seed=SEEDS)
def test_answer_key_matches_the_context(kind: str, size: int, seed: int) -> None:
    spec = GeneratedTask(kind, size, seed)
    instance = spec.build()
    assert _solve_independently(instance) == spec.answer
    assert spec.grader.grade(spec.answer).passed


def test_answer_keys_at_one_million() -> None:
    for kind in KIND_NAMES:
        spec = GeneratedTask(kind, SIZES["1m"], 0)
        assert _solve_independently(spec.build()) == spec.answer


# --- graders ----------------------------------------------------------------------------------

PROSE = st.text(alphabet=st.characters(categories=["L", "N", "P"]), min_size=1, max_size=12)
SPACE = st.sampled_from(["", " ", "\n", "\t ", "  \n"])


@given(
    expected=st.integers(min_value=0, max_value=10**9), pad=SPACE, quote=st.sampled_from(["", '"', "'", "`"])
)
def test_integer_grader_accepts_the_value_in_normal_form(expected: int, pad: str, quote: str) -> None:
    grade = ExactInteger(expected).grade(f"{pad}{quote}{expected}{quote}{pad}")
    assert grade.passed, grade.reason
    assert (grade.grader, grade.grader_version) == ("exact-integer", "1")


@given(expected=st.integers(min_value=0, max_value=10**9), data=st.data())
def test_integer_grader_rejects_a_changed_digit(expected: int, data: st.DataObject) -> None:
    text = str(expected)
    at = data.draw(st.integers(min_value=0, max_value=len(text) - 1))
    digit = data.draw(st.sampled_from([d for d in "0123456789" if d != text[at]]))
    grade = ExactInteger(expected).grade(text[:at] + digit + text[at + 1 :])
    assert not grade.passed
    assert grade.grader == "exact-integer"


@given(expected=st.integers(min_value=0, max_value=10**6), prose=PROSE, before=st.booleans())
def test_integer_grader_rejects_extra_prose(expected: int, prose: str, before: bool) -> None:
    answer = f"{prose} {expected}" if before else f"{expected} {prose}"
    assert not ExactInteger(expected).grade(answer).passed


@given(
    expected=st.integers(min_value=0, max_value=10**6),
    other=st.integers(min_value=0, max_value=10**6),
    sep=st.sampled_from([" or ", ", ", "\n", " "]),
)
def test_integer_grader_rejects_two_candidates(expected: int, other: int, sep: str) -> None:
    assert not ExactInteger(expected).grade(f"{expected}{sep}{other}").passed
    assert not ExactInteger(expected).grade(f"{other}{sep}{expected}").passed


@pytest.mark.parametrize("answer", [None, "", "   ", '""', "42.", "42.0", "4,2", "forty-two", "0x2a", "+ 42"])
def test_integer_grader_rejects_empty_and_other_forms(answer: str | None) -> None:
    grade = ExactInteger(42).grade(answer)
    assert not grade.passed
    assert grade.reason


CODE = st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZ23456789", min_size=8, max_size=8)


@given(code=CODE, pad=SPACE, quote=st.sampled_from(["", '"', "'", "`"]))
def test_text_grader_accepts_the_code(code: str, pad: str, quote: str) -> None:
    grade = ExactText(code).grade(f"{pad}{quote}{code}{quote}{pad}")
    assert grade.passed and (grade.grader, grade.grader_version) == ("exact-text", "1")


@given(code=CODE, data=st.data())
def test_text_grader_rejects_perturbed_codes(code: str, data: st.DataObject) -> None:
    at = data.draw(st.integers(min_value=0, max_value=len(code) - 1))
    char = data.draw(st.sampled_from([c for c in "ABCDEFGHJKLMNPQRSTUVWXYZ23456789" if c != code[at]]))
    grader = ExactText(code)
    for answer in (code[:at] + char + code[at + 1 :], code.lower(), code[:-1], code + code[-1]):
        if answer != code:  # an all-digit code lowercases to itself
            assert not grader.grade(answer).passed


@given(code=CODE, other=CODE, prose=PROSE)
def test_text_grader_rejects_prose_and_two_candidates(code: str, other: str, prose: str) -> None:
    grader = ExactText(code)
    assert not grader.grade(f"The code is {code}").passed
    assert not grader.grade(f"{code} {prose}").passed
    assert not grader.grade(f"{code} or {other}").passed
    assert not grader.grade(f"{code}.").passed
    assert "extra text" in grader.grade(f"{prose} {code}").reason


def test_normalisation_removes_one_pair_of_quotes_only() -> None:
    assert normalise_answer('  "x"  ') == "x"
    assert normalise_answer("\"'x'\"") == "'x'"
    assert normalise_answer("\"x'") == "\"x'"
    with pytest.raises(ValueError, match="normal form"):
        ExactText(" padded ")


# --- specs and suites ---------------------------------------------------------------------------


def test_specs_and_suites_satisfy_the_shared_protocols() -> None:
    suite = load_suite("standard")
    assert isinstance(suite, Suite)
    specs = list(suite.tasks())
    assert len(specs) == len(OUR_KINDS) * 4
    assert {(s.kind, s.size) for s in specs} == {(k, n) for k in OUR_KINDS for n in SIZES.values()}
    assert len({s.task_id for s in specs}) == len(specs)
    for spec in specs[:2]:
        assert isinstance(spec, TaskSpec)
        assert isinstance(spec.grader, Grader)
        assert suite.task(spec.task_id) is spec


@pytest.mark.parametrize("name", sorted(SUITES))
def test_every_suite_covers_every_kind_of_its_family(name: str) -> None:
    suite = load_suite(name)
    family = (
        PAPER_KINDS if name.startswith("paper") else TURN_KINDS if name.startswith("turns") else OUR_KINDS
    )
    assert {s.kind for s in suite.tasks()} == set(family)
    assert set(OUR_KINDS) | set(PAPER_KINDS) == set(KINDS)
    assert suite.version == "1"


def test_seeds_repeat_tasks_under_a_distinct_name() -> None:
    suite = load_suite("smoke", seeds=3)
    assert suite.name == "smoke*3"
    assert sorted(s.task_id for s in suite.tasks() if s.kind == "needle") == [
        "needle-10k-s0",
        "needle-10k-s1",
        "needle-10k-s2",
    ]


@given(kind=st.sampled_from(KIND_NAMES), size=st.sampled_from([*SIZES.values(), 2_500, 12_345]), seed=SEEDS)
def test_task_ids_round_trip(kind: str, size: int, seed: int) -> None:
    spec = GeneratedTask(kind, size, seed)
    assert task_from_id(spec.task_id) == spec


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: load_suite("nope"), "unknown suite"),
        (lambda: load_suite("smoke", seeds=0), "seeds"),
        (lambda: GeneratedTask("haystack", 10_000), "unknown task kind"),
        (lambda: GeneratedTask("needle", 100), "task size"),
        (lambda: GeneratedTask("needle", 10_000, -1), "seed"),
        (lambda: task_from_id("needle_10k"), "<kind>-<size>-s<seed>"),
        (lambda: load_suite("smoke").task("needle-1m-s0"), "has no task"),
    ],
)
def test_bad_names_get_actionable_errors(call: object, message: str) -> None:
    with pytest.raises(ToolUsageError, match=re.escape(message)):
        call()  # type: ignore[operator]


# --- the paper's metrics ----------------------------------------------------------------------


def test_numeric_score_is_oolongs_metric() -> None:
    grader = NumericScore(12)
    assert grader.grade(" '12' ").passed and grader.grade("12").score == 1.0
    near = grader.grade("14")
    assert not near.passed and near.score == round(0.75**2, 6) and "off by 2" in near.reason
    for bad in (None, "", "twelve", "12 records", "1.2e1"):
        grade = grader.grade(bad)
        assert not grade.passed and grade.score == 0.0


@given(
    expected=st.sets(st.tuples(st.integers(1, 99), st.integers(100, 199)), min_size=1, max_size=12),
    extra=st.sets(st.tuples(st.integers(200, 299), st.integers(300, 399)), max_size=6),
    keep=st.integers(min_value=0, max_value=12),
)
def test_pairs_f1_scores_listed_pairs_in_either_order(
    expected: set[tuple[int, int]], extra: set[tuple[int, int]], keep: int
) -> None:
    kept = sorted(expected)[:keep]
    listed = [(b, a) if i % 2 else (a, b) for i, (a, b) in enumerate(kept + sorted(extra))]
    answer = (
        "Pairs:\n"
        + "\n".join(f"({a},{b})" for a, b in listed)
        + "\n"
        + (f"({kept[0][1]}, {kept[0][0]})" if kept else "")
    )
    grade = PairsF1(frozenset(expected)).grade(answer)
    right = len(kept)
    if right == 0:
        assert grade.score == 0.0
    else:
        precision, recall = right / (right + len(extra)), right / len(expected)
        assert grade.score == round(2 * precision * recall / (precision + recall), 6)
    assert grade.passed == (right == len(expected) and not extra)
    assert parse_pairs("(5, 5) (7, 3)") == {(3, 7)}

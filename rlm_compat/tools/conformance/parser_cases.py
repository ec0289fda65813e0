"""Inputs of the parser conformance corpus: hand-written edge cases plus a seeded generator.

Only inputs live here; the recorder runs upstream's ``extract_final``, ``extract_final_var``,
``is_final`` and ``parse_response`` on them and writes the expectations. Case ids are part of the
fixtures, so they must never change meaning: generation draws only from
``random.Random(seed).random()`` (the one stream Python promises to keep across versions), makes
every choice from tuples in a fixed order, and case *k* does not depend on how many cases are asked
for. Importing this module does nothing but define constants and functions.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TypedDict, TypeVar

__all__ = [
    "DEFAULT_CASES",
    "DEFAULT_SEED",
    "EDGE_CASES",
    "EnvValue",
    "ParserCase",
    "all_parser_cases",
    "edge_cases",
    "generate_parser_cases",
]

EnvValue = str | int | list[str] | None


class ParserCase(TypedDict):
    """One input: a plain JSON-able dict at run time."""

    id: str
    response: str
    env: dict[str, EnvValue]


DEFAULT_CASES = 6000
DEFAULT_SEED = 20261121

_T = TypeVar("_T")


def _copy(case: ParserCase) -> ParserCase:
    env = {k: list(v) if isinstance(v, list) else v for k, v in case["env"].items()}
    return {"id": case["id"], "response": case["response"], "env": env}


def _case(name: str, response: str, env: dict[str, EnvValue] | None = None) -> ParserCase:
    return _copy({"id": f"parser.edge.{name}", "response": response, "env": env or {}})


_ENV: dict[str, EnvValue] = {
    "answer": "Paris",
    "result": 42,
    "items": ["a", "b"],
    "context": "doc",
    "query": "q",
}

EDGE_CASES: tuple[ParserCase, ...] = (
    _case("empty", ""),
    _case("no_directive", "The answer is 42."),
    _case("plain_double", 'FINAL("42")'),
    _case("plain_single", "FINAL('42')"),
    _case("space_before_paren", 'FINAL ("x")'),
    _case("newline_before_paren", 'FINAL\n("x")'),
    _case("tabs_inside_paren", 'FINAL(\t"x"\t)'),
    _case("nbsp_inside_paren", 'FINAL(\u00a0"x"\u00a0)'),
    _case("padded_answer_stripped", 'FINAL("  padded answer \n")'),
    _case("empty_string", 'FINAL("")'),
    _case("empty_call", "FINAL()"),
    _case("triple_double", 'FINAL("""multi\nline""")'),
    _case("triple_single", "FINAL('''multi\nline''')"),
    _case("greedy_triple", 'FINAL("""a""")\nthen FINAL("""b""")'),
    _case("greedy_triple_to_last_quotes", 'FINAL("""first""")\nprose with """ later'),
    _case("triple_beats_earlier_double", 'FINAL("a")\nFINAL("""b""")'),
    _case("double_beats_earlier_single", "FINAL('a')\nFINAL(\"b\")"),
    _case("triple_unterminated", 'FINAL("""never closed'),
    _case("four_quotes", 'FINAL(""""x"""")'),
    _case("escaped_double_quote", 'FINAL("say \\"hi\\"")'),
    _case("escaped_single_quote", "FINAL('it\\'s')"),
    _case("apostrophe_in_double", 'FINAL("it\'s")'),
    _case("backslash_n_escape", 'FINAL("a\\nb")'),
    _case("backslash_continuation", 'FINAL("a\\\nb")'),
    _case("invalid_escape", 'FINAL("\\d+")'),
    _case("raw_string", 'FINAL(r"C:\\path\\new")'),
    _case("implicit_concatenation", 'FINAL("a" "b" \'c\')'),
    _case("bytes_literal", "FINAL(b'x')"),
    _case("fstring", 'FINAL(f"{answer}!")', _ENV),
    _case("unquoted_name_present", "FINAL(answer)", _ENV),
    _case("unquoted_name_missing", "FINAL(answer)"),
    _case("unquoted_expression", "FINAL(len(context))", _ENV),
    _case("number_literal", "FINAL(42)"),
    _case("unclosed_string", 'FINAL("unclosed'),
    _case("unclosed_paren", 'FINAL("x"'),
    _case("quote_mismatch", "FINAL(\"x')"),
    _case("nested_parens_in_answer", 'FINAL("f(x) = (1 + 2)")'),
    _case("close_paren_in_answer", 'FINAL("a ) b")'),
    _case("unicode_answer", 'FINAL("日本語 🙂 é")'),
    _case("unicode_whitespace_strip", 'FINAL("\u3000x\u2028")'),
    _case("nul_in_answer", 'FINAL("a\x00b")'),
    _case("crlf_after", 'FINAL("a")\r\n'),
    _case("crlf_in_triple", 'FINAL("""a\r\nb""")'),
    _case("multiline_call", 'FINAL(\n    "x"\n)'),
    _case("comment_inside_call", 'FINAL("x"  # note\n)'),
    _case("trailing_comma", 'FINAL("x",)'),
    _case("two_arguments", 'FINAL("a", "b")'),
    _case("keyword_argument", 'FINAL(answer="x")'),
    _case("many_directives_one_line", 'FINAL("1") FINAL("2") FINAL("3")'),
    _case("directive_then_text", 'FINAL("x") is my answer'),
    _case("final_var_present", "FINAL_VAR(answer)", _ENV),
    _case("final_var_missing", "FINAL_VAR(answr)", _ENV),
    _case("final_var_empty_env", "FINAL_VAR(answer)"),
    _case("final_var_quoted_name", 'FINAL_VAR("answer")', _ENV),
    _case("final_var_triple_quoted_name", 'FINAL_VAR("""answer""")', _ENV),
    _case("final_var_spaces", "FINAL_VAR ( answer )", _ENV),
    _case("final_var_newlines", "FINAL_VAR(\nanswer\n)", _ENV),
    _case("final_var_int_value", "FINAL_VAR(result)", _ENV),
    _case("final_var_list_value", "FINAL_VAR(items)", _ENV),
    _case("final_var_none_value", "FINAL_VAR(nothing)", {"nothing": None}),
    _case("final_var_hyphen", "FINAL_VAR(my-var)", {"my": "m", "my-var": "v"}),
    _case("final_var_dotted", "FINAL_VAR(a.b)", {"a": "A"}),
    _case("final_var_digits", "FINAL_VAR(123)", {"123": "digits"}),
    _case("final_var_unicode_name", "FINAL_VAR(résumé)", {"résumé": "cv"}),
    _case("final_var_keyword_name", "FINAL_VAR(None)", {"None": "kw"}),
    _case("final_var_private", "FINAL_VAR(_secret)", {"_secret": "s"}),
    _case("final_var_empty_call", "FINAL_VAR()"),
    _case("final_var_first_missing_second_present", "FINAL_VAR(a) FINAL_VAR(b)", {"b": "B"}),
    _case("final_var_then_final", 'FINAL_VAR(answer)\nFINAL("literal")', _ENV),
    _case("final_then_final_var", 'FINAL("literal")\nFINAL_VAR(answer)', _ENV),
    _case("final_var_space_not_final", "FINAL_VAR (answer)", _ENV),
    _case("assign_then_final_var", 'answer = "computed"\nFINAL_VAR(answer)'),
    _case("lowercase_final", 'final("x")'),
    _case("prefixed_name", 'MY_FINAL("x")'),
    _case("finale_word", 'FINALE("x")'),
    _case("prefixed_final_var", "XFINAL_VAR(answer)", _ENV),
    _case("final_variable_word", "FINAL_VARIABLE(answer)", _ENV),
    _case("prose_example", 'Use FINAL("answer") when you are done.'),
    _case("inline_code_example", 'When done, write `FINAL("x")`.'),
    _case("bold_directive", '**FINAL("x")**'),
    _case("blockquote_directive", '> FINAL("x")'),
    _case("indented_prose_directive", '    FINAL("x")'),
    _case("apostrophe_prose_then_final", "I don't know yet.\nFINAL('ok')"),
    _case("fence_python", '```python\nFINAL("x")\n```'),
    _case("fence_repl_tag", '```repl\nFINAL("x")\n```'),
    _case("fence_tilde", '~~~\nFINAL("x")\n~~~'),
    _case("fence_unclosed", '```python\nFINAL("x")'),
    _case("fence_final_var", "```python\nFINAL_VAR(answer)\n```", _ENV),
    _case("fence_then_prose_final_var", "```python\nanswer = 6 * 7\n```\nFINAL_VAR(answer)"),
    _case("string_in_code", "```python\nprint(\"FINAL('x')\")\n```"),
    _case("comment_in_code", '```python\n# FINAL("x")\nx = 1\n```'),
    _case("conditional_in_code", '```python\nif len(context) > 10:\n    FINAL("big")\n```'),
    _case("function_body_in_code", '```python\ndef done():\n    FINAL("x")\n```'),
    _case("fence_inside_triple", 'FINAL("""```python\nx = 1\n```""")'),
    _case("closing_fence_in_string", '```python\ns = """\n```\n"""\nFINAL("after")\n```'),
    _case("str_call", "FINAL(str(42))"),
    _case("long_answer", 'FINAL("' + "a" * 2000 + '")'),
    _case("adversarial_open_double", 'FINAL("' * 200),
    _case("adversarial_open_triple", 'FINAL("""' * 100),
    _case("adversarial_open_paren", "FINAL(" * 200),
    _case("adversarial_final_var", "FINAL_VAR(" * 200 + "x"),
)
"""Named inputs, one per quirk; add new ones at the end, never rename or reuse a name."""

# Pieces that make upstream's regexes and the fixed parser disagree or stumble.
_FRAGMENTS: tuple[str, ...] = (
    "FINAL",
    "FINAL",
    "FINAL(",
    "FINAL(",
    "FINAL(",
    "FINAL_VAR(",
    "FINAL_VAR(",
    "FINAL_VAR",
    "FINAL (",
    "FINAL\n(",
    "FINAL_VAR (",
    "final(",
    "MY_FINAL(",
    "FINALE(",
    "FINAL_VARIABLE(",
    "(",
    "(",
    ")",
    ")",
    ")",
    "((",
    "))",
    "[",
    "]",
    "{",
    "}",
    '"',
    '"',
    '"',
    "'",
    "'",
    "'",
    '"""',
    '"""',
    "'''",
    '""',
    "''",
    "\\",
    "\\",
    '\\"',
    "\\'",
    "\\\\",
    "\\n",
    "\n",
    "\n",
    "\n",
    " ",
    " ",
    "  ",
    "\t",
    "\r\n",
    "\r",
    "answer",
    "result",
    "x",
    "items",
    "Paris",
    "the answer is 42",
    "42",
    "é",
    "日本語",
    "🙂",
    "\u00a0",
    "\u2028",
    "\u3000",
    "\x1c",
    "\x85",
    "\x00",
    "```python\n",
    "```\n",
    "```",
    "~~~\n",
    "`",
    "#",
    "r",
    "b",
    "f",
    "u",
    "rb",
    "+",
    ",",
    ".",
    ":",
    "=",
    "$",
    "use ",
    "print(",
)
_WORDS: tuple[str, ...] = (
    "answer",
    "result",
    "x",
    "items",
    "count",
    "summary",
    "context",
    "query",
    "Paris",
    "42",
    "The answer is",
    "done",
    "",
    " ",
    "é",
    "日本",
    "🙂",
    "a\nb",
    "it's",
    'say "hi"',
)
_NAMES: tuple[str, ...] = (
    "answer",
    "result",
    "x",
    "items",
    "count",
    "summary",
    "context",
    "query",
    "final_answer",
    "_private",
    "FINAL",
    "data",
    "résumé",
    "a1",
)
_PROSE: tuple[str, ...] = (
    "Let me look at the context.",
    "I found it.",
    "The answer is below.",
    "Done:",
    'Use FINAL("answer") when done.',
    "I don't know yet.",
    "",
    "Result:",
    "Here is the code:",
    "We can stop now.",
    "**Answer**",
    "> quoted",
    "- item",
)
_CODE: tuple[str, ...] = (
    "answer = 'Paris'",
    "result = len(context)",
    "x = 1",
    "print(context[:100])",
    "items = re.findall(r'\\w+', context)",
    "summary = recursive_llm('q', context)",
    "if x:\n    y = 2",
    '# comment FINAL("no")',
    "s = \"FINAL('x')\"",
    "count = 3",
)


class _Rng:
    """Choices built on ``random()`` alone, whose sequence Python guarantees across versions."""

    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)

    def below(self, bound: int) -> int:
        return min(int(self._random.random() * bound), bound - 1)

    def pick(self, options: Sequence[_T]) -> _T:
        return options[self.below(len(options))]

    def chance(self, probability: float) -> bool:
        return self._random.random() < probability


def _literal(rng: _Rng) -> str:
    """An argument in one of the ways a model might quote it (or not)."""
    word = rng.pick(_WORDS)
    form = rng.below(12)
    if form == 0:
        return repr(word)
    if form == 1:
        return '"' + word + '"'
    if form == 2:
        return "'" + word + "'"
    if form == 3:
        return '"""' + word + '"""'
    if form == 4:
        return "'''" + word + "'''"
    if form == 5:
        return rng.pick(("r", "b", "f", "u", "rb", "R")) + repr(word)
    if form == 6:
        return repr(word) + rng.pick((" ", "", "\n")) + repr(rng.pick(_WORDS))
    if form == 7:
        return rng.pick(_NAMES)
    if form == 8:
        return rng.pick(("len(context)", "str(result)", "answer.strip()", "x + 1", "42", ""))
    if form == 9:
        return '"' + word + rng.pick(('\\"', "\\n", "\\", "\\\\", "(", ")")) + word + '"'
    if form == 10:
        return rng.pick(("", " ", "\t", "\n")) + repr(word) + rng.pick(("", " ", ",", "\n"))
    return rng.pick(_FRAGMENTS) + word


def _directive(rng: _Rng) -> str:
    kind = rng.pick(("FINAL", "FINAL", "FINAL", "FINAL_VAR", "FINAL_VAR"))
    gap = rng.pick(("", "", "", " ", "\t", "\n"))
    inner = rng.pick(("", "", " ", "\n"))
    if kind == "FINAL_VAR" and rng.chance(0.6):
        argument = rng.pick(_NAMES) if rng.chance(0.7) else repr(rng.pick(_NAMES))
    else:
        argument = _literal(rng)
    close = rng.pick((")", ")", ")", ")", "", ")\n", ") "))
    return f"{kind}{gap}({inner}{argument}{inner}{close}"


def _soup(rng: _Rng) -> str:
    return "".join(rng.pick(_FRAGMENTS) for _ in range(1 + rng.below(14)))


def _template(rng: _Rng) -> str:
    parts: list[str] = []
    if rng.chance(0.6):
        parts.append(rng.pick(_PROSE))
    if rng.chance(0.5):
        fence = rng.pick(("```python", "```", "```repl", "~~~"))
        body = [rng.pick(_CODE) for _ in range(rng.below(3))]
        if rng.chance(0.6):
            body.append(_directive(rng))
        close = fence[:3] if rng.chance(0.85) else ""
        parts.append("\n".join([fence, *body, close]))
    if rng.chance(0.7):
        prefix = rng.pick(("", "", "", "  ", "Answer: ", "`", "> "))
        parts.append(prefix + _directive(rng))
    if rng.chance(0.3):
        parts.append(rng.pick(_PROSE))
    return rng.pick(("\n", "\n\n", " ", "\r\n")).join(parts)


def _several(rng: _Rng) -> str:
    joiner = rng.pick(("\n", " ", "", "\n\n"))
    return joiner.join(_directive(rng) for _ in range(2 + rng.below(3)))


def _mutated(rng: _Rng) -> str:
    text = _template(rng) if rng.chance(0.5) else _several(rng)
    for _ in range(1 + rng.below(3)):
        if not text:
            break
        at = rng.below(len(text) + 1)
        action = rng.below(3)
        if action == 0:
            text = text[:at] + text[at + 1 :]
        elif action == 1:
            text = text[:at] + rng.pick(_FRAGMENTS) + text[at:]
        else:
            text = text[:at]
    return text


_STYLES: tuple[Callable[[_Rng], str], ...] = (_soup, _soup, _template, _template, _several, _mutated)


def _env_value(rng: _Rng) -> EnvValue:
    kind = rng.below(6)
    if kind == 0:
        return rng.below(1000) - 100
    if kind == 1:
        return [rng.pick(_WORDS) for _ in range(rng.below(3))]
    if kind == 2:
        return None
    return rng.pick(_WORDS) + rng.pick(("", " ", "\n", "  padded  "))


def _env(rng: _Rng, response: str) -> dict[str, EnvValue]:
    env: dict[str, EnvValue] = {}
    for name in _NAMES:
        wanted = 0.6 if name in response else 0.1
        if rng.chance(wanted):
            env[name] = _env_value(rng)
    return env


def generate_parser_cases(n: int = DEFAULT_CASES, seed: int = DEFAULT_SEED) -> list[ParserCase]:
    """``n`` FINAL-heavy cases ``parser.gen.00001`` ...; case k is the same for every ``n >= k``."""
    rng = _Rng(seed)
    cases: list[ParserCase] = []
    for number in range(1, n + 1):
        response = rng.pick(_STYLES)(rng)
        cases.append({"id": f"parser.gen.{number:05d}", "response": response, "env": _env(rng, response)})
    return cases


def edge_cases() -> list[ParserCase]:
    """Copies of :data:`EDGE_CASES` (callers may mutate them)."""
    return [_copy(case) for case in EDGE_CASES]


def all_parser_cases(n: int = DEFAULT_CASES, seed: int = DEFAULT_SEED) -> list[ParserCase]:
    """Edge cases then generated ones, sorted by id as the fixture files are."""
    return sorted([*edge_cases(), *generate_parser_cases(n, seed)], key=lambda case: case["id"])

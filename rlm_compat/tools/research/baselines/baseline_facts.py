"""The facts of the unofficial-baseline memo (design seed 003), each as snippets to run.

docs/research/unofficial-baseline.md is generated from these (``rlm-compat baseline``): every
snippet runs on ysz/recursive-llm 2fb46cc itself (under each Python given), recursive-llm 0.5.0,
rlms 0.1.1 and rlm_compat's two profiles, and the doc shows the real outputs. A fact's
:class:`Expect` is what the memo says 2fb46cc does; the doc computes per Python whether that holds,
so a claim the measurement contradicts is reported, never assumed.

Snippets that reach for an escape only ever print ``reachable`` / ``blocked`` and a type name:
the doc must never show host state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FACTS", "Expect", "Fact", "Probe", "all_probes"]


@dataclass(frozen=True)
class Expect:
    """What the memo (or the brief) says 2fb46cc does on a probe.

    ``outcome`` is ``output`` (the step returned text containing ``contains``), ``error`` (it raised,
    type and message containing ``contains``), ``env`` (after the step, the tagged-JSON env value
    of ``name`` equals ``value``), ``hang`` (the step never returned) or ``answer`` (a parser or
    loop probe ended with ``contains`` as its answer; ``None``-answer via ``value=None``).
    """

    outcome: str
    contains: str = ""
    step: int = -1
    name: str = ""
    value: Any = None


@dataclass(frozen=True)
class Probe:
    """One snippet, run on every implementation as a conformance case of ``kind``.

    ``repl``: a fresh executor with ``options``, ``env`` loaded, each of ``steps`` executed;
    ``show`` names the env entries the doc prints. ``parser``: the final-answer functions on
    ``response`` with ``env``. ``loop``: an RLM whose scripted model answers ``replies`` in order;
    the doc prints the lines of the first call's messages containing ``grep`` and the answer.
    ``beyond_memo`` marks a probe of something the memo does not state (the fact's claim or
    comment does), so its verdict is not credited to the memo.
    """

    id: str
    kind: str = "repl"
    steps: tuple[str, ...] = ()
    env: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    show: tuple[str, ...] = ()
    response: str = ""
    replies: tuple[str, ...] = ()
    grep: str = ""
    expect: Expect | None = None
    beyond_memo: bool = False

    def case(self) -> dict[str, Any]:
        """The conformance case (docs/protocol.md) this probe runs as."""
        if self.kind == "repl":
            return {
                "id": self.id,
                "topic": "baseline",
                "steps": list(self.steps),
                "env": dict(self.env),
                "options": dict(self.options),
            }
        if self.kind == "parser":
            return {"id": self.id, "topic": "baseline", "response": self.response, "env": dict(self.env)}
        return {
            "id": self.id,
            "topic": "baseline",
            "query": "What is in the context?",
            "context": "baseline probe context",
            "replies": list(self.replies),
            "options": {"prompt_version": "2fb46cc", **self.options},
        }


@dataclass(frozen=True)
class Fact:
    """One statement of the memo (``memo``, quoted; empty for the brief's additions) and its probes.

    ``comment`` says what the probes show beyond the computed verdict; it names no number that
    the probes do not print.
    """

    id: str
    title: str
    memo: str
    claim: str
    probes: tuple[Probe, ...]
    comment: str = ""


_CONTEXT = {"context": "Hello World from the RLM baseline memo"}

FACTS: tuple[Fact, ...] = (
    Fact(
        "executor",
        "REPLExecutor runs code with RestrictedPython, globals and env as two dicts",
        "実行器: `REPLExecutor`… コンパイル: `compile_restricted_exec(code)` / "
        "実行: `exec(byte_code.code, restricted_globals, env)`",
        "Code is compiled by RestrictedPython and executed with the restricted globals and the "
        "caller's `env` as two separate dicts: top-level assignments land in `env`, and underscore "
        "names are refused at compile time.",
        (
            Probe(
                "executor.assign_lands_in_env",
                steps=("answer = 6 * 7",),
                show=("answer",),
                expect=Expect("env", name="answer", value=42),
            ),
            Probe(
                "executor.underscore_refused",
                beyond_memo=True,
                steps=("x = ().__class__",),
                expect=Expect("error", '"__class__" is an invalid attribute name'),
            ),
            Probe(
                "executor.function_cannot_see_env",
                beyond_memo=True,
                steps=("def first_word():\n    return context.split()[0]\nfirst_word()",),
                env=_CONTEXT,
                expect=Expect("error", "name 'context' is not defined"),
            ),
        ),
        "Because `env` is the *locals* dict of `exec`, a function defined in the step looks its "
        "free names up in the restricted globals, not in `env`: the last probe, not stated in the "
        "memo, is the same scoping rule that breaks comprehensions below.",
    ),
    Fact(
        "stdout",
        "stdout is captured and returned as the REPL output",
        "stdout を捕捉して「REPL出力」として返す。",
        "What the code prints is the step's output; a silent step says so.",
        (
            Probe(
                "stdout.print",
                steps=("print('found', len(context))",),
                env=_CONTEXT,
                expect=Expect("output", "found 38"),
            ),
            Probe(
                "stdout.silent",
                steps=("n = len(context)",),
                env=_CONTEXT,
                expect=Expect("output", "Code executed successfully (no output)"),
            ),
            Probe(
                "stdout.stale_print_repeats",
                beyond_memo=True,
                steps=("print('first')", "y = 2"),
                expect=Expect("output", "first", step=1),
            ),
        ),
        "Not in the memo: the `_print` collector is stored in `env`, so the next step that prints "
        "nothing shows the previous step's print again (third probe, step 2).",
    ),
    Fact(
        "last_line",
        "a simple last line is evaluated and its value appended",
        "最終行が「単純式」っぽい場合は `eval(last_line, ...)` を試し、その値を出力に追記する / "
        "キーワード/代入が含まれる場合は除外（`=`, `import`, `def`, `class`, `if`, `for`, `while`, `with`）",
        "The last line's value is shown unless the line contains one of the listed words as a "
        "substring; since the line was already executed, it runs twice.",
        (
            Probe("last_line.value_shown", steps=("x = 5\nx * 2",), expect=Expect("output", "10")),
            Probe(
                "last_line.comparison_hidden",
                steps=("x = 5\nx == 5",),
                expect=Expect("output", "Code executed successfully (no output)"),
            ),
            Probe(
                "last_line.substring_if_hides",
                beyond_memo=True,
                steps=("diff = 3\ndiff",),
                expect=Expect("output", "Code executed successfully (no output)"),
            ),
            Probe(
                "last_line.runs_twice",
                beyond_memo=True,
                steps=("items = []\nitems.append('x')",),
                show=("items",),
                expect=Expect("env", name="items", value=["x", "x"]),
            ),
        ),
        "`x == 5` is hidden because it contains `=`; `diff` is hidden because it contains `if`. "
        "The second evaluation is why `items.append('x')` as a last line appends twice.",
    ),
    Fact(
        "fences",
        "code fences: ```python and bare ``` are stripped, ```repl is not",
        "`execute` は、LLMがコードを ```python か ``` で囲んだ場合に、それを剥がして実行する / "
        "` ```repl ` 専用ではない",
        "A step wrapped in a ```python or a bare ``` fence runs; the paper's ```repl fence is not "
        "recognised.",
        (
            Probe(
                "fences.python",
                steps=("```python\nprint('ran')\n```",),
                expect=Expect("output", "ran"),
            ),
            Probe("fences.bare", steps=("```\nprint('ran')\n```",), expect=Expect("output", "ran")),
            Probe(
                "fences.repl",
                steps=("```repl\nprint('ran')\n```",),
                expect=Expect("error", "name 'repl' is not defined"),
            ),
            Probe(
                "fences.prose_before",
                beyond_memo=True,
                steps=("Let me look.\n```python\nprint('ran')\n```",),
                expect=Expect("output", "ran"),
            ),
        ),
        "With ```repl the fence's language tag is left in the code as a bare name, so the step "
        "fails with a NameError; rlms (the paper's implementation) runs only ```repl blocks, so it "
        "runs nothing of the ```python and bare fences. Prose before a ```python fence is dropped "
        "with the fence (fourth probe).",
    ),
    Fact(
        "injected",
        "re, json, math, datetime, timedelta, Counter, defaultdict are injected",
        "`_build_globals` 内で、以下のモジュール/型を「環境に直接注入」している: "
        "`re`, `json`, `math` / `datetime`, `timedelta` / `Counter`, `defaultdict`",
        "Each injected name is usable without any import.",
        (
            Probe(
                "injected.all_seven",
                steps=(
                    "print(re.escape('a.b'), json.dumps([1]), math.sqrt(16), datetime(2024, 1, 2).year, "
                    "timedelta(days=2).days, Counter('aab')['a'], defaultdict(int)['k'])",
                ),
                expect=Expect("output", "a\\.b [1] 4.0 2024 2 2 0"),
            ),
        ),
    ),
    Fact(
        "import_os",
        "`import os` is refused",
        "テストでは `import os` が禁止であることを確認している",
        "Importing `os` fails.",
        (
            Probe(
                "import_os.refused",
                steps=("import os",),
                expect=Expect("error", "__import__ not found"),
            ),
        ),
        "In 2fb46cc it fails because the namespace has no `__import__` at all, not because of an "
        "allowlist: every import fails the same way (next fact). recursive-llm 0.5.0 added an "
        "import allowlist: `os` is refused by name there, and `import re` works.",
    ),
    Fact(
        "import_re",
        "`import re` fails with `__import__ not found`",
        "`import re` は失敗（`__import__ not found`）",
        "Importing an injected module fails.",
        (
            Probe(
                "import_re.refused",
                steps=("import re",),
                env=_CONTEXT,
                expect=Expect("error", "__import__ not found"),
            ),
            Probe(
                "import_re.from_import",
                beyond_memo=True,
                steps=("from collections import Counter",),
                expect=Expect("error", "__import__ not found"),
            ),
            Probe(
                "import_re.block_lost",
                beyond_memo=True,
                steps=("import re\nhits = re.findall('o', context)",),
                env=_CONTEXT,
                show=("hits",),
                expect=Expect("error", "__import__ not found"),
            ),
        ),
        "The import aborts the whole step: nothing after it runs (`hits` is never set), which is "
        "why the quirk ablation measured it as the largest single cause of broken blocks in replayed "
        "model code (see docs/research/quirk-ablation.md).",
    ),
    Fact(
        "re_without_import",
        "`re` works without import",
        "`re` は import 無しで使える（globals に注入されているため）",
        "The injected `re` is usable directly.",
        (
            Probe(
                "re_without_import.findall",
                steps=("print(re.findall(r'[A-Z]\\w+', context))",),
                env=_CONTEXT,
                expect=Expect("output", "['Hello', 'World', 'RLM']"),
            ),
        ),
    ),
    Fact(
        "prompt",
        "the system prompt says `re` is already imported",
        "`re: already imported regex module (use re.findall, re.search, etc.)`",
        "2fb46cc's system prompt (`build_system_prompt`) tells the model that `re` is already imported.",
        (
            Probe(
                "prompt.re_line",
                kind="loop",
                replies=('FINAL("done")',),
                grep="re:",
                expect=Expect("answer", "done"),
            ),
        ),
        "The probe runs the loop with a scripted model and prints the lines of the first model "
        "call's messages containing `re:`. Models write `import re` anyway, which is the fact above.",
    ),
    Fact(
        "comprehension",
        "comprehension bodies cannot see env names",
        "OK: `[c for c in context if c.isupper()]` / NG: `[context[i:i+10] for i in range(...)]` → "
        "`name 'context' is not defined`",
        "A name used only in a comprehension's expression (not its first iterable) is not found.",
        (
            Probe(
                "comprehension.iterable_clause_ok",
                steps=("caps = [c for c in context if c.isupper()]",),
                env=_CONTEXT,
                show=("caps",),
                expect=Expect("env", name="caps", value=["H", "W", "R", "L", "M"]),
            ),
            Probe(
                "comprehension.expression_name_error",
                steps=("chunks = [context[i:i+10] for i in range(0, len(context), 10)]",),
                env=_CONTEXT,
                show=("chunks",),
                expect=Expect("error", "name 'context' is not defined"),
            ),
            Probe(
                "comprehension.lambda",
                beyond_memo=True,
                steps=("size = 10\nsplit = lambda s: s[:size]\nsplit(context)",),
                env=_CONTEXT,
                expect=Expect("error", "name 'size' is not defined"),
            ),
        ),
        "The memo's NG example holds on Python 3.10 and 3.11 only: from 3.12 comprehensions are "
        "inlined into the enclosing code (PEP 709) and see `env`, so 2fb46cc itself runs it on "
        "3.12 and 3.13 (the verdict line says on which Pythons the memo holds). Lambdas and "
        "functions keep the quirk on every version.",
    ),
    Fact(
        "final",
        "FINAL needs a quoted string; FINAL_VAR takes an identifier and stringifies env[x]",
        "`FINAL(...)` は引用符（`\"...\"`, `'...'`, `'''...'''`, `\"\"\"...\"\"\"`）を前提に抽出する / "
        "`FINAL_VAR(x)` は `env[x]` を文字列化して返す（`x` は `\\w+` の識別子のみ）",
        "`rlm.parser.parse_response` on the model's reply.",
        (
            Probe("final.double", kind="parser", response='FINAL("42")', expect=Expect("answer", "42")),
            Probe("final.single", kind="parser", response="FINAL('42')", expect=Expect("answer", "42")),
            Probe(
                "final.triple",
                kind="parser",
                response='FINAL("""line one\nline two""")',
                expect=Expect("answer", "line one\nline two"),
            ),
            Probe(
                "final.triple_single",
                kind="parser",
                response="FINAL('''42''')",
                expect=Expect("answer", "42"),
            ),
            Probe("final.unquoted", kind="parser", response="FINAL(42)", expect=Expect("answer", value=None)),
            Probe(
                "final.var",
                kind="parser",
                response="FINAL_VAR(result)",
                env={"result": 42},
                expect=Expect("answer", "42"),
            ),
            Probe(
                "final.var_missing",
                beyond_memo=True,
                kind="parser",
                response="FINAL_VAR(result)",
                expect=Expect("answer", value=None),
            ),
            Probe(
                "final.var_dotted",
                kind="parser",
                response="FINAL_VAR(obj.value)",
                env={"obj": {"value": 1}},
                expect=Expect("answer", value=None),
            ),
            Probe(
                "final.loop_unquoted",
                beyond_memo=True,
                kind="loop",
                replies=("FINAL(42)", 'FINAL("fallback")'),
                expect=Expect("answer", "fallback"),
            ),
        ),
        "rlm_compat's `parser` module functions are upstream's in both profiles (drop-in callers "
        "use them directly), so its parser rows equal 2fb46cc's. Profile fixed's *loop* has its own "
        "ending rules (docs/parser.md): the last probe runs the whole loop, whose scripted model "
        'first answers `FINAL(42)`, then `FINAL("fallback")`.',
    ),
    Fact(
        "augmented",
        "`x += 1`, unpacking, item writes and classes fail",
        "",
        "Not in the memo (the brief lists them): RestrictedPython's guards for these are missing "
        "from 2fb46cc's globals.",
        (
            Probe(
                "augmented.inplace",
                steps=("count = 0\ncount += 1",),
                show=("count",),
                expect=Expect("error", "_inplacevar_"),
            ),
            Probe(
                "augmented.unpack",
                steps=("first, second = context.split()[:2]",),
                env=_CONTEXT,
                show=("first", "second"),
                expect=Expect("error", "_unpack_sequence_"),
            ),
            Probe(
                "augmented.item_write",
                steps=("counts = {}\ncounts['a'] = 1",),
                show=("counts",),
                expect=Expect("error", "_write_"),
            ),
            Probe(
                "augmented.class",
                steps=("class Hit:\n    pass",),
                expect=Expect("error", "__metaclass__"),
            ),
        ),
    ),
    Fact(
        "timeout",
        "`timeout` is never enforced",
        "",
        "Not in the memo: `REPLExecutor(timeout=1)` stores the value and never uses it.",
        (
            Probe(
                "timeout.while_true",
                steps=("while True:\n    pass",),
                options={"timeout": 1},
                expect=Expect("hang"),
            ),
        ),
        "A hang is reported when the step runs past the harness's step limit (3 s); the step never "
        "returns by itself.",
    ),
    Fact(
        "escape",
        "the injected modules open a sandbox escape",
        "",
        "Not in the memo: the injected `re` is the real module, and `re.enum.sys.modules['os']` "
        "is the real `os`. Shown only as reachable / blocked.",
        (
            Probe(
                "escape.re_enum_os",
                steps=(
                    "try:\n"
                    "    reached = callable(re.enum.sys.modules['os'].system)\n"
                    "    print('reachable' if reached else 'blocked')\n"
                    "except AttributeError:\n"
                    "    print('blocked (AttributeError)')\n"
                    "except Exception:\n"
                    "    print('blocked')",
                ),
                expect=Expect("output", "reachable"),
            ),
        ),
        "rlms runs model code unsandboxed in the host process (real `__import__` and `open`), so "
        "the harness never sends it code that touches the host: its row says so.",
    ),
)


def all_probes() -> list[Probe]:
    """Every probe of every fact, in document order (ids are unique)."""
    probes = [p for fact in FACTS for p in fact.probes]
    ids = [p.id for p in probes]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"duplicate probe ids: {duplicates}")
    return probes

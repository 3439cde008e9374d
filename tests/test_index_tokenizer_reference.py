"""The tokenizer (stretch-wise Latin words in C, cached runs) gives the same tokens, in the same order, as a plain
run-by-run reference of its rules (each _RUN_RE run: CJK -> segmenter words minus stop-words and single characters,
then bigrams; a lone CJK character itself; Latin -> lower-cased, stop-words and over-long runs dropped), on real notes,
edge cases and random text. A faster rewrite must keep it passing."""

import random
import unicodedata

from reme_engine.index import tokenizer as tk
from reme_engine.index.tokenizer import MixedTokenizer


def _reference(text: str, cut) -> list[str]:
    text = unicodedata.normalize("NFKC", text)
    out: list[str] = []
    for run in tk._RUN_RE.findall(text):
        if tk._CJK_RUN_RE.match(run):
            if len(run) == 1:
                out.append(run)
                continue
            out += [w for w in cut(run) if len(w) > 1 and w not in tk.ZH_STOPWORDS]
            out += [bg for bg in (run[i:i + 2] for i in range(len(run) - 1)) if bg not in tk.ZH_STOPWORDS]
        else:
            w = run.lower()
            if len(w) <= tk.MAX_LATIN_LEN and w not in tk.EN_STOPWORDS:
                out.append(w)
    return out


def _cut():
    import rjieba

    return rjieba.cut_for_search


EDGE = [
    "", "   ", "的", "的的", "一个人", "Café ÉCOLE straße ΟΔΟΣ", "Redis缓存2024年", "ＡＢＣ全角１２３", "a_b-c.d",
    "x" * 41 + "中文" + "y" * 40, "中" * 200, "中文\n\n英文 English\r\n日本語のテキスト 한국어 텍스트",
    "İstanbul İİ", "emoji 🍅 番茄🍅炒蛋", "tab\tsep\x1cfile\x85nel", "代码 `foo_bar(baz)` 和 [[链接|别名]]",
    "数组nums中的元素，返回其下标。Given an array nums, return indices.", "\ue000私用区\ue000abc", "surrogate \udc80 here 中",
]


def test_tokens_match_the_run_by_run_reference_on_edge_cases_and_random_text():
    cut = _cut()
    tok = MixedTokenizer(cut, "rjieba-test")
    for text in EDGE:
        assert tok.tokenize(text) == _reference(text, cut), text
    rng = random.Random(7)
    alphabet = list("abcXYZ019 _-.,;:()[]#*\n\t") + list("的了是中文数组链表树图算法动态规划，。！？、") + ["é", "ß", "Σ", "ｱ", "가"]
    for _ in range(400):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 300)))
        assert tok.tokenize(text) == _reference(text, cut), repr(text)
        assert tok.tokenize(text) == _reference(text, cut), repr(text)  # again, from the caches


def test_tokens_match_the_reference_on_real_notes():
    from conftest import shared

    cut = _cut()
    tok = MixedTokenizer(cut, "rjieba-test")
    for vault in ("vaults/knowledge-garden-zh", "corpus/doocs-leetcode-md"):
        for p in sorted(shared(vault).rglob("*.md"))[:150]:
            text = p.read_text(encoding="utf-8", errors="replace")
            assert tok.tokenize(text) == _reference(text, cut), p.name

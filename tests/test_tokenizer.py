"""The mixed tokenizer: jieba words + CJK bigrams, Latin words kept out of jieba; backend agreement."""

import logging

from reme_engine.index.tokenizer import MixedTokenizer, default_tokenizer


def test_chinese_words_and_bigrams():
    toks = default_tokenizer().tokenize("光伏产业链研究")
    assert "光伏" in toks and "产业链" in toks
    assert "链研" in toks  # bigram recall net for unknown words


def test_latin_words_are_lowercased_and_not_split():
    toks = default_tokenizer().tokenize("Email the DRAGON about HTML and the RAG pipeline")
    assert {"email", "dragon", "html", "rag", "pipeline"} <= set(toks)
    assert "the" not in toks and "and" not in toks


def test_mixed_runs_split_between_scripts():
    toks = default_tokenizer().tokenize("Redis缓存2024年")
    assert "redis" in toks and "缓存" in toks


def test_fullwidth_is_normalised():
    assert "abc" in default_tokenizer().tokenize("ＡＢＣ")


def test_fingerprint_names_backend():
    fp = default_tokenizer().fingerprint
    assert "jieba" in fp


def test_rjieba_agrees_with_jieba_on_real_text():
    """Agreement of the fast backend with jieba's search mode on real Chinese notes (measured, as
    ARCHITECTURE §10.2 asks)."""
    import jieba
    from conftest import shared

    jieba.setLogLevel(logging.WARNING)
    slow = MixedTokenizer(lambda s: list(jieba.cut_for_search(s)), "jieba")
    fast = default_tokenizer()
    root = shared("vaults/knowledge-garden-zh")
    texts = [p.read_text(encoding="utf-8", errors="ignore") for p in sorted(root.rglob("*.md"))[:300]]
    a = set().union(*(slow.tokenize(t) for t in texts))
    b = set().union(*(fast.tokenize(t) for t in texts))
    jacc = len(a & b) / len(a | b)
    assert jacc > 0.97, jacc

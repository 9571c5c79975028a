"""Semantic recall: offline static embeddings (wordllama's bundled weights) with numpy alone.

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


def available() -> bool:
    """Tell whether the embedding model is installed with its files (no import, no network)."""
    if model_dir() is None:
        return False
    return all(
        importlib.util.find_spec(name) is not None
        for name in ("numpy", "tokenizers", "safetensors")
    )


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
        self.table = np.ascontiguousarray(table.astype(np.float32))  # as WordLlama does
        self.tokenizer = tokenizer
        self.dim = int(table.shape[1])
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

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Return one L2-normalised float32 row per text (zeros for a text with no tokens)."""
        np = self._np
        out: Vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        table = self.table
        with self._lock:
            tokens = self._ids([text[:MAX_CHARS] for text in texts])
        for row, ids in enumerate(tokens):
            if ids:
                out[row] = table[ids].sum(axis=0)  # ids come from this vocabulary: in range
        # The mean's direction: pooling then normalising, as WordLlama.embed(norm=True).
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        out /= norms
        return out


_lock = threading.Lock()
_embedder: Embedder | None = None


def get_embedder() -> Embedder:
    """Return this process's embedder, loading the model on first use."""
    global _embedder
    with _lock:
        if _embedder is None:
            _embedder = Embedder()
        return _embedder


def loaded() -> bool:
    """Tell whether this process has loaded the model already."""
    return _embedder is not None


@functools.lru_cache(maxsize=256)
def embed_query(text: str) -> Vectors:
    """Return the (read-only, cached per process) embedding of a query."""
    vector: Vectors = get_embedder().embed([text])[0]
    vector.setflags(write=False)
    return vector


def record_text(record: Mapping[str, Any]) -> str:
    """Return the text of a record that is embedded: title, tags and content."""
    title = str(record.get("title", "") or "")
    tags = " ".join(str(tag) for tag in tags_of(record))
    content = str(record.get("content", "") or "")
    return f"{title}\n{tags}\n{content}"[:MAX_CHARS]


def text_hash(text: str) -> str:
    """Return the key under which a text's vector is stored (model included)."""
    return hashlib.blake2b(f"{MODEL_ID}\0{text}".encode(), digest_size=16).hexdigest()

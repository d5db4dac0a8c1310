"""Training step of a small GPT-style language model built from torch.nn.

A decoder-only transformer (token and position embeddings, pre-norm `nn.TransformerEncoder`
layers with a causal mask, tied output projection) on random token sequences held on the
device. Units: tokens/s (batch size × sequence length per step).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from pytest_dlbench.data import token_sequences
from pytest_dlbench.suite.presets import add_arguments as add_training_args
from pytest_dlbench.workloads.arguments import device_of, parse, positive_int
from pytest_dlbench.workloads.batches import tensor_batches
from pytest_dlbench.workloads.compilation import CompileOptions
from pytest_dlbench.workloads.precision import backend_flags, optimizer_options, setup_precision
from pytest_dlbench.workloads.train import train_steps

if TYPE_CHECKING:
    import torch

__all__ = ["build_model", "make_parser", "train"]


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lm", description=__doc__)
    parser.add_argument("--vocab-size", type=positive_int, default=32000)
    parser.add_argument("--seq-len", type=positive_int, default=512)
    parser.add_argument("--d-model", type=positive_int, default=512)
    parser.add_argument("--n-layers", type=positive_int, default=6)
    parser.add_argument("--n-heads", type=positive_int, default=8)
    parser.add_argument("--batch-size", type=positive_int, default=16)
    add_training_args(parser)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--num-sequences", type=positive_int, default=256,
                        help="random sequences cycled through (default 256)")
    parser.add_argument("--seed", type=int, default=0)
    return parser


def build_model(
    vocab_size: int, seq_len: int, d_model: int, n_layers: int, n_heads: int
) -> torch.nn.Module:
    import torch
    from torch import nn

    if d_model % n_heads:
        raise ValueError(f"--d-model {d_model} is not divisible by --n-heads {n_heads}")

    class TinyGPT(nn.Module):
        causal_mask: torch.Tensor  # a buffer (register_buffer below)

        def __init__(self) -> None:
            super().__init__()
            self.tokens = nn.Embedding(vocab_size, d_model)
            self.positions = nn.Embedding(seq_len, d_model)
            layer = nn.TransformerEncoderLayer(
                d_model, n_heads, dim_feedforward=4 * d_model, dropout=0.0,
                activation="gelu", batch_first=True, norm_first=True,
            )
            # Nested tensors only help padded batches and are unsupported with norm_first.
            self.blocks = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, vocab_size, bias=False)
            self.head.weight = self.tokens.weight  # tied, as in GPT-2
            # GPT-2's small init: N(0, 1) embeddings, tied to the head, give huge first logits.
            nn.init.normal_(self.tokens.weight, std=0.02)
            nn.init.normal_(self.positions.weight, std=0.02)
            mask = nn.Transformer.generate_square_subsequent_mask(seq_len)
            self.register_buffer("causal_mask", mask, persistent=False)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            t = idx.shape[1]
            pos = torch.arange(t, device=idx.device)
            x = self.tokens(idx) + self.positions(pos)
            x = self.blocks(x, mask=self.causal_mask[:t, :t], is_causal=True)
            return self.head(self.norm(x))

    return TinyGPT()


def train(bench: Any) -> None:
    """Next-token prediction with AdamW on random tokens."""
    import torch


    args = parse(make_parser(), bench)
    device = device_of(bench)
    precision = setup_precision(args, device)
    torch.manual_seed(args.seed)
    bench.set_units("tokens/s")

    model = build_model(args.vocab_size, args.seq_len, args.d_model, args.n_layers,
                        args.n_heads).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr,
                                  **optimizer_options(device))
    vocab = args.vocab_size

    def compute_loss(batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        inputs, targets = batch
        logits = model(inputs)
        return torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))

    # Token data is tiny next to the model: keep it all on the device, as LM trainers do with
    # pre-tokenised shards, so the loop measures the model.
    data = token_sequences(args.num_sequences, args.seq_len, args.vocab_size, seed=args.seed)
    on_device = tuple(t.to(device) for t in data.tensors)
    # The rate is in tokens: one example (a sequence) holds seq_len of them.
    bench.watch(model, lambda: on_device[0][: args.batch_size],
                items_per_example=args.seq_len)
    batches = tensor_batches(on_device, args.batch_size, device=device, seed=args.seed)

    model.train()
    with backend_flags(tf32=precision.tf32):
        train_steps(
            bench, batches, compute_loss=compute_loss, optimizer=optimizer,
            precision=precision, device=device,
            items_per_step=args.batch_size * args.seq_len,
            compile=CompileOptions.from_args(args),
        )

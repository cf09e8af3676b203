"""A small causal language model: token ids in (an ``nn.Embedding`` front, so its input is ``int64``), a
two-layer Transformer encoder under a causal mask, next-token logits out, and a cross-entropy loss against
the ids shifted by one.

    rooflow estimate examples.tiny_lm.model:build --input 64:int64 --loss examples.tiny_lm.model:loss --mode training

rooflow draws the ids uniformly below the model's smallest ``num_embeddings`` (here the 64 positions), so
every lookup of both tables is in range.
"""

import torch
from torch import nn

VOCABULARY = 512
CONTEXT = 64


class TinyLM(nn.Module):
    def __init__(self, vocabulary: int = VOCABULARY, context: int = CONTEXT, width: int = 64, layers: int = 2):
        super().__init__()
        self.tokens = nn.Embedding(vocabulary, width)
        self.positions = nn.Embedding(context, width)
        layer = nn.TransformerEncoderLayer(width, nhead=4, dim_feedforward=4 * width, batch_first=True,
                                           norm_first=True)
        self.body = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, vocabulary)

    def forward(self, ids: torch.Tensor) -> dict:
        length = ids.shape[1]
        positions = torch.arange(length, device=ids.device)
        causal = nn.Transformer.generate_square_subsequent_mask(length, device=ids.device)
        hidden = self.body(self.tokens(ids) + self.positions(positions), mask=causal, is_causal=True)
        return {"logits": self.head(hidden), "ids": ids}


def build() -> nn.Module:
    return TinyLM()


def loss(output) -> torch.Tensor:
    """Next-token cross-entropy: the logits at each position against the id one further on."""
    logits, ids = output["logits"], output["ids"]
    return nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())

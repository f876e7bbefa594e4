#!/usr/bin/python3
"""tests/fixtures/torchzip_1000.pt: torchzip_sd.pt (tools/ref/make_torch_zip_fixtures.py) with a
1000-class label table (1001 rows: the classes and the null row), written by torch.save's zip
format. A 1000-class .pt has no class names of its own, so the program gives it ImageNet's; the
tests use it to look for "207 golden retriever" and --class by name. Run with /usr/bin/python3
(torch 1.13); the table is seeded, so the file is the same every run."""
import os

import torch

FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tests", "fixtures")


def main():
    sd = torch.load(os.path.join(FIX, "torchzip_sd.pt"))
    key = "y_embedder.embedding_table.weight"
    gen = torch.Generator().manual_seed(1000)
    sd[key] = 0.02 * torch.randn(1001, sd[key].shape[1], generator=gen)
    torch.save(sd, os.path.join(FIX, "torchzip_1000.pt"))
    print("wrote torchzip_1000.pt:", tuple(sd[key].shape), key)


if __name__ == "__main__":
    main()

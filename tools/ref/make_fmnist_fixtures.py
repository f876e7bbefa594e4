"""PyTorch reference of the Fashion-MNIST feature classifier for tests/test_fmnist.c: runs the
shipped weights (assets/fmnist_classifier.safetensors) on 8 images (6 test images, one of
Gaussian noise, one black) and writes tests/fixtures/fmnist_feat.safetensors with the input
(`in` [8, 1, 32, 32], in [-1, 1]), the features (`feats` [8, 128]) and the logits (`logits` [8, 10]).

    /usr/bin/python3 tools/ref/make_fmnist_fixtures.py
"""

import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402
import train_fmnist_classifier as tfc  # noqa: E402


def main():
    torch.set_num_threads(1)
    tensors, meta = st_io.load("assets/fmnist_classifier.safetensors")
    model = tfc.FmnistClassifier()
    model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in tensors.items()})
    model.eval()
    u8, _ = tfc.load_split(True)
    x = tfc.to_input(u8[:6])
    rng = np.random.RandomState(3)
    noise = torch.from_numpy(np.clip(rng.randn(1, 1, 32, 32), -1, 1).astype(np.float32))
    black = -torch.ones(1, 1, 32, 32)
    x = torch.cat([x, noise, black])
    with torch.no_grad():
        feats, logits = model(x)
    st_io.save("tests/fixtures/fmnist_feat.safetensors", {"in": x, "feats": feats, "logits": logits},
               {"script": "tools/ref/make_fmnist_fixtures.py", "weights": "assets/fmnist_classifier.safetensors",
                "test_accuracy": meta.get("test_accuracy", "")})
    print("labels of the 6 test images:", tfc.load_split(True)[1][:6].tolist(), "predicted:",
          logits.argmax(1).tolist())


if __name__ == "__main__":
    main()

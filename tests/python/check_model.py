#!/usr/bin/python3
"""Loads a model tandem wrote, runs it in Python on the input tandem used, and checks that
the outputs equal tandem's (tests/script_model_test.cc runs it with Debian's python3-torch).

  check_model.py jit MODEL.pt INPUT.pt EXPECTED.pt
  check_model.py 'torchvision.models.resnet18(num_classes=10)' MODEL.pt INPUT.pt EXPECTED.pt
  check_model.py recipe MODEL.pt INPUT.pt EXPECTED.pt   (runs the "python" line of model.json)

Exit 0 when torch.allclose; 1 with the largest difference otherwise."""
import json
import os
import sys

import torch
import torchvision  # noqa: F401  (the constructor expression names it)


def main(kind: str, model_file: str, input_file: str, expected_file: str) -> int:
    if kind == "jit":
        model = torch.jit.load(model_file)
    elif kind == "recipe":
        folder = os.path.dirname(os.path.abspath(model_file))
        with open(os.path.join(folder, "model.json")) as f:
            recipe = json.load(f)["python"]
        scope = {}
        os.chdir(folder)
        exec(recipe, scope)  # what model.json tells a user to run
        model = scope["model"]
    else:
        model = eval(kind)  # a constructor expression from the test, e.g. torchvision.models.resnet18(...)
        model.load_state_dict(torch.load(model_file, weights_only=False))  # strict: every name and shape must match
    model.eval()
    x = torch.load(input_file, weights_only=False)
    expected = torch.load(expected_file, weights_only=False)
    with torch.no_grad():
        got = model(x)
    diff = (got - expected).abs().max().item()
    print(f"{kind}: outputs {tuple(got.shape)}, largest difference {diff:.3g}")
    return 0 if torch.allclose(got, expected, rtol=1e-4, atol=1e-4) else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))

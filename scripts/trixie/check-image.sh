#!/usr/bin/env bash
# scripts/trixie/check-image.sh STAGED: inside a trixie system with python-packages.txt
# installed, starts what stage-image.sh staged under STAGED (its OUT/root) as the image
# would: `tandem --version`, then `import tandem` with trixie's PyTorch, torchvision,
# numpy and Pillow. scripts/test-cuda runs it with the GPU driver's libcuda hidden, as on
# a CPU instance group.
set -euo pipefail
staged=${1:?usage: check-image.sh STAGED}
"$staged/opt/tandem/bin/tandem" --version
site=$(python3 -c "import sysconfig; print(sysconfig.get_path('platlib'))")
PYTHONPATH="$staged$site" python3 -c '
import numpy, PIL, torch, torchvision
import tandem, tandem.torch
print("python module", tandem.__file__, "torch", torch.__version__, "torchvision", torchvision.__version__)'

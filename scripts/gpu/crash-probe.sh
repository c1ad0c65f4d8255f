#!/usr/bin/env bash
# Where does the data path crash on the GPU machine? Builds tandem (with -g), makes a few
# JPEGs, and runs bench pipeline over growing pipelines, under gdb when it is there.
set -uo pipefail
out=${1:?usage: crash-probe.sh OUTDIR}
py=/opt/torch/.venv/bin/python3; [ -x "$py" ] || py=python3
bash scripts/gpu/build-on-device.sh --python "$py" --build-dir build-gpu --target tandem -- -DTANDEM_BUILD_TESTS=OFF -DCMAKE_CXX_FLAGS=-g > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
source build-gpu/device-env.sh
{
  grep -m1 "model name" /proc/cpuinfo; ldd --version | head -1; which gdb catchsegv addr2line
  ldd build-gpu/tandem | grep -i "jpeg\|png\|stdc\|gcc_s\|fmt\|spdlog"
  "$py" bench/make_jpegs.py --out /tmp/probe-jpegs --count 64 --classes 4 --jobs 8 2>&1 | tail -2
} 2>&1 | tee "$out/env.txt"
for p in "decode,random_resized_crop(224)" "decode(scaled=0),random_resized_crop(224)" "decode,hflip,random_resized_crop(224)" "decode,hflip,center_crop(224)"; do
  timeout 60 build-gpu/tandem bench pipeline --data imagefolder:/tmp/probe-jpegs --pipeline "$p" --image-size 224 --threads 1 --seconds 2 --batch-size 16 > /tmp/probe.txt 2>&1
  echo "pipeline=$p rc=$?"
  grep -A60 "fatal signal" /tmp/probe.txt | tee -a "$out/trace.txt"
  grep -o "build-gpu/tandem +0x[0-9a-f]*" /tmp/probe.txt | awk '{print $2}' | while read -r off; do
    printf '%s ' "$off"; addr2line -f -C -i -e build-gpu/tandem "$(printf '0x%x' $((off - 1)))" | tr '\n' ' '; echo
  done
done 2>&1 | tee "$out/matrix.txt"

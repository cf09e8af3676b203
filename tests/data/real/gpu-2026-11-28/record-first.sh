#!/usr/bin/env bash
# On the lent H200: rooflow's own user path for single ops and ceilings, then the doctor, each under a timeout.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu-kit/wheels/*.whl >/dev/null 2>&1 || echo "wheel install failed"
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"; } > $OUT/env-h200.txt 2>&1
cat $OUT/env-h200.txt
s=$(date +%s)
timeout -k 5 ${1:-380} python3 -m rooflow ceilings --device h200-sxm-141gb --single-ops $OUT/single-ops --output $OUT/ceilings-h200.json > $OUT/ceilings-h200.txt 2> $OUT/single-ops.log
echo "single ops rc=$? after $(( $(date +%s) - s )) s"; tail -20 $OUT/single-ops.log
s=$(date +%s)
timeout -k 5 ${2:-90} python3 -m rooflow ceilings --device h200-sxm-141gb --calibrate --output $OUT/ceilings-calibrate-h200.json > $OUT/ceilings-calibrate-h200.txt 2>&1
echo "calibrate rc=$? after $(( $(date +%s) - s )) s"; tail -5 $OUT/ceilings-calibrate-h200.txt
s=$(date +%s)
timeout -k 5 ${3:-60} python3 -m rooflow doctor --device h200-sxm-141gb --files $OUT/doctor > $OUT/doctor-h200.txt 2>&1
echo "doctor rc=$? after $(( $(date +%s) - s )) s"; tail -15 $OUT/doctor-h200.txt
ls -la $OUT $OUT/single-ops/*

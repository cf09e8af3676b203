#!/usr/bin/env bash
# On the lent H200: rooflow ceilings --single-ops, now with the kernels each conv/linear/bmm call launched; tarred back.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu-kit/wheels/*.whl >/dev/null 2>&1 || echo "wheel install failed"
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
s=$(date +%s)
timeout -k 5 ${1:-300} python3 -m rooflow ceilings --device h200-sxm-141gb --single-ops $OUT/single-ops --output $OUT/ceilings-h200.json > $OUT/ceilings-h200.txt 2> $OUT/single-ops.log
echo "single ops rc=$? after $(( $(date +%s) - s )) s"; cat $OUT/single-ops.log | tail -20; cat $OUT/ceilings-h200.txt | head -3
cd $OUT && tar czf single-ops-h200.tgz single-ops && rm -rf single-ops && ls -la

#!/usr/bin/env bash
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu-kit/wheels/*.whl >/dev/null 2>&1 || echo "wheel install failed"
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
timeout -k 5 ${2:-170} python3 .gpu-kit/sweep_new.py $OUT/h200-sweep-new-models.jsonl ${1:-140} 2>&1 | grep -v Warning | tail -40

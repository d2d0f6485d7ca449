#!/usr/bin/env bash
# One call on a lent GPU machine (issue 28): install the carried wheels, check the CUDA path against the
# CPU path, then run benchmarks/llm_scale.py's sections on a random-weight SmolLM2-135M-shaped model.
#
# Prepared here (nothing is fetched there; the embedded GGUF is too large to travel, its tokenizer is not):
#   python benchmarks/shapes.py --export .gpu/smollm2-tokenizer
#   pip download --no-deps --only-binary=:all: --python-version 3.12 ... -d .whl mesa pydantic pydantic-core \
#       sqlalchemy sqlmodel alembic mako annotated-types typing-inspection typing-extensions   (the versions of .venv)
# and both folders carried with the call (.whl, .gpu). Usage there:  SECTIONS=scale,hf bash benchmarks/gpu_run.sh
set -uo pipefail
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=true
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
python3 -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)"
if [ "${TESTS:-1}" = 1 ]; then
  python3 -m pytest -q -p no:cacheprovider ${TEST_FILES:-tests/test_cuda.py tests/test_llm_vectorised.py} 2>&1 | tee "$OUT/test_cuda.log" | tail -15
fi
timeout "${BENCH_TIMEOUT:-540}" python3 benchmarks/llm_scale.py --shape smollm2-135m --tokenizer .gpu/smollm2-tokenizer \
  --sections "${SECTIONS:-scale,versus_single,hf,ticks,shapes,knobs}" ${SHAPES:+--shapes "$SHAPES"} \
  --out "$OUT/llm_scale-cuda.json" 2>&1 | tee "$OUT/bench.log" | grep -v "^ *$" | tail -60

#!/usr/bin/env bash
# llama-cpp-python's OpenAI-compatible server, for the served-model end-to-end test
# (tests/test_llm_served.py). It is built from source: only the CPU library, portable code, no
# llava/mtmd, tests, examples or tools (~8 min on 2 cores). A failed or over-long build is not
# fatal: the test then skips and says why.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
if $PY -c "import llama_cpp.server" 2>/dev/null; then
    echo "llama-cpp-python already installed"; exit 0
fi
export CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF"
export CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)"
started=$(date +%s)
if timeout 2400 $PY -m pip install -q "llama-cpp-python[server]==0.3.36" torch==2.13.0; then
    echo "llama-cpp-python built in $(( $(date +%s) - started )) s"
else
    echo "WARNING: llama-cpp-python did not build (exit $?); the served-model end-to-end test will skip" >&2
fi
exit 0

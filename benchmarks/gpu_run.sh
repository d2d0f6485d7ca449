#!/usr/bin/env bash
# Issue 44: the one prepared call on a lent GPU machine. Installs the carried wheels, then runs, each under its own
# time limit inside one budget (a section that would not fit is skipped and says so):
#   env      the GPU, versions, Triton, and the project's import chain
#   tests    tests/test_cuda.py (CUDA against CPU; the Triton kernels compiled against torch; CUDA graphs of steps and
#            of shared prefixes against eager ones), tests/test_lean.py and tests/test_prompt_text.py (the tokenizer's
#            prefix cut against this machine's tokenizers)
#   tokenize benchmarks/tokenize_probe.py: the benchmark's prompts tokenised whole and with their common beginning cut
#            off, at 0 (default), 1, 4, 8 and 16 tokenizer threads, one process each; where some count cuts a batch in
#            2/3 of the default's time or less, the sections after it run with RAYON_NUM_THREADS set to it (said so)
#   scale    benchmarks/llm_scale.py scale + engines on random weights of SmolLM2-135M's shape: decisions/s by batch
#            size beside the device's limits, and the fused path against the old one in the same process
#   ticks    a 1,000-member social tick and a 1,000-fisher tick through the real runner and a SQLite store
#   profile  benchmarks/gpu_profile.py: a one-token step per engine, the launch floor, the host's cost of each kind of
#            launch, a 1,000-request Number call split (render, tokenize, tokenize whole, layout, engine) and profiled,
#            whether the tokenizer's prefix cut applied, and the engine's counters (prefix and step CUDA graphs)
#   shapes   the 0.5B-7B cost table (random weights of public shapes)
#   versus   the batched tick against one call per agent, and against transformers' generate
# then merges the sections' JSON into $OUT/llm_scale-cuda.json and prints the summary table LAST. Sections a short
# rerun leaves out (SECTIONS=...) are carried into that file from benchmarks/results/llm_scale-cuda.json when it was
# measured on a GPU too, each named under `carried` with its run's date; its headline stays under `previous_run`.
# A short rerun (env ~18 s, tests ~90, tokenize ~20, scale ~90, ticks ~35, profile ~30, summary ~13 on an H200;
# version 3 adds one CUDA test, the tokenizer's tests and the tokenize section):
#   SECTIONS=env,tests,tokenize,scale,ticks,profile BUDGET_S=400 bash benchmarks/gpu_run.sh  (device call: timeout_s 450)
#
# Prepared on the developer's machine (nothing can be fetched on the GPU machine), both folders git-ignored
# (.git/info/exclude) and carried with the call:
#   python benchmarks/shapes.py --export .gpu/smollm2-tokenizer
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
#     mesa==3.3.1 pydantic==2.14.4 pydantic-core==2.50.5 sqlalchemy==2.1.9 sqlmodel==0.0.50 alembic==1.20.1 \
#     mako==1.4.3 annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions==4.16.0   (the versions of .venv)
# On the GPU machine:   bash benchmarks/gpu_run.sh            (carry .whl and .gpu; $OUT is where results go)
# Here, first:          PY=.venv/bin/python DRY=1 bash benchmarks/gpu_run.sh    (the same steps on a CPU, tiny sizes)
# Knobs: SECTIONS=env,tests,tokenize,scale,ticks,profile,shapes,versus  BUDGET_S=450  OUT=/tmp/gpu-out  TOKENIZER=.gpu/...
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
DRY=${DRY:-0}
OUT=${OUT:-/tmp/gpu-out}
PY=${PY:-python3}
SECTIONS=${SECTIONS:-env,tests,tokenize,scale,ticks,profile,shapes,versus}
TOKENIZER=${TOKENIZER:-.gpu/smollm2-tokenizer}
RESERVE=20  # seconds kept for the summary
mkdir -p "$OUT"
PARTS=$(mktemp -d /tmp/gpu-parts.XXXXXX)
LOG=$OUT/run.log
STATUS=$PARTS/status
: > "$LOG"
: > "$STATUS"
T0=$SECONDS
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=true

say() { echo "[gpu_run +$((SECONDS - T0))s] $*" | tee -a "$LOG"; }

if [ "$DRY" = 1 ]; then
  BUDGET_S=${BUDGET_S:-1500}
  DEV=(--device cpu); SHAPE=tiny; SIZES=1,8; N=8; SHAPES=tiny; THREADS=0,1
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
  say "DRY run on the CPU with tiny sizes: it checks the script, not the GPU"
else
  BUDGET_S=${BUDGET_S:-450}
  DEV=(); SHAPE=smollm2-135m; SIZES=1,64,256,1000,4096; N=1000; THREADS=0,1,4,8,16
  SHAPES=qwen2.5-0.5b,smollm2-360m,qwen2.5-1.5b,smollm2-1.7b,qwen2.5-7b
  if compgen -G ".whl/*.whl" > /dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tee -a "$LOG"
    [ "${PIPESTATUS[0]}" = 0 ] || say "WARNING: installing the carried wheels failed: the sections that need them will fail"
  else
    say "WARNING: no .whl folder was carried: mesa, pydantic and SQLModel are missing there, and the sections that need them will fail"
  fi
  export PYTHONPATH=/tmp/site:$PWD
fi
[ -f "$TOKENIZER/tokenizer.json" ] || say "WARNING: no tokenizer at $TOKENIZER (carry .gpu): the benchmarks will fail"

section() {  # NAME LIMIT_SECONDS COMMAND...: run COMMAND under min(LIMIT, what the budget has left)
  local name=$1 want=$2
  shift 2
  case ",$SECTIONS," in *",$name,"*) ;; *) return 0 ;; esac
  local left=$((BUDGET_S - (SECONDS - T0) - RESERVE))
  local limit=$((want < left ? want : left))
  if [ "$limit" -lt 20 ]; then
    say "SKIP $name: only ${left}s of the ${BUDGET_S}s budget left"
    echo "$name skipped 0" >> "$STATUS"
    return 0
  fi
  say "START $name (limit ${limit}s)"
  local started=$SECONDS
  timeout -k 10 "$limit" "$@" 2>&1 | tee -a "$LOG"
  local rc=${PIPESTATUS[0]}
  echo "$name $rc $((SECONDS - started))" >> "$STATUS"
  if [ "$rc" = 0 ]; then say "END $name after $((SECONDS - started))s"
  elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then say "FAILED $name: out of its ${limit}s"
  else say "FAILED $name: exit code $rc after $((SECONDS - started))s (see above)"; fi
}

# the llm_scale command line of this run's model (each section adds its own arguments)
BENCH=("$PY" benchmarks/llm_scale.py "${DEV[@]}" --shape "$SHAPE" --tokenizer "$TOKENIZER" --sizes "$SIZES" --requests "$N")

cat > "$PARTS/env_check.py" <<'PYEOF'
import importlib, sys, time
t = time.perf_counter()
import os, torch, transformers, tokenizers
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__,
      "tokenizers", tokenizers.__version__, "gpu", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
print("cpus", os.cpu_count(), "affinity", len(os.sched_getaffinity(0)), "torch threads", torch.get_num_threads(),
      "RAYON_NUM_THREADS", os.environ.get("RAYON_NUM_THREADS"))
try:
    import triton
    print("triton", triton.__version__)
except Exception as exc:
    print("triton missing:", exc)
missing = []
for name in ("mesa", "pydantic", "pydantic_core", "sqlalchemy", "sqlmodel", "alembic", "networkx", "yaml", "numpy", "pandas",
             "sim.store.store", "runner.execution", "scenarios", "agents.llm.local.model", "agents.llm.local.lean_engine",
             "benchmarks.llm_scale", "benchmarks.gpu_profile", "benchmarks.tokenize_probe"):
    try:
        mod = importlib.import_module(name)
        print(" ", name, getattr(mod, "__version__", ""))
    except Exception as exc:
        missing.append(name)
        print("  IMPORT FAILED", name, type(exc).__name__, exc)
print(f"imports {time.perf_counter() - t:.1f}s")
sys.exit(1 if missing else 0)
PYEOF

section env 60 bash -c "command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,clocks.max.sm --format=csv; \"$PY\" $PARTS/env_check.py"
section tests 150 bash -c "set -o pipefail; \"$PY\" -m pytest -q -p no:cacheprovider -m 'not slow' tests/test_cuda.py tests/test_lean.py tests/test_prompt_text.py 2>&1 | tee $PARTS/tests.log"
section tokenize 60 "$PY" benchmarks/tokenize_probe.py --tokenizer "$TOKENIZER" --render "$N" --texts "$PARTS/prompts.texts" \
  --threads "$THREADS" --json "$PARTS/tokenize.json" --pick "$PARTS/threads"
if [ -s "$PARTS/threads" ] && [ -z "${RAYON_NUM_THREADS:-}" ]; then
  export RAYON_NUM_THREADS=$(cat "$PARTS/threads")
  say "the tokenizer cuts a batch at least 1.5x faster on $RAYON_NUM_THREADS threads than by default: RAYON_NUM_THREADS=$RAYON_NUM_THREADS from here on"
fi
section scale 180 "${BENCH[@]}" --sections scale,engines --out "$PARTS/scale.json"
section ticks 100 "${BENCH[@]}" --sections ticks --out "$PARTS/ticks.json"
section profile 90 "$PY" benchmarks/gpu_profile.py "${DEV[@]}" --shape "$SHAPE" --tokenizer "$TOKENIZER" --requests "$N" \
  --out "$OUT/profile.txt" --json "$PARTS/profile.json"
section shapes 160 "${BENCH[@]}" --sections shapes --shapes "$SHAPES" --out "$PARTS/shapes.json"
section versus 60 "${BENCH[@]}" --sections versus_single,hf --out "$PARTS/versus.json"

cp "$PARTS/tests.log" "$OUT/tests.log" 2>/dev/null
say "summary (all sections' JSON merged into $OUT/llm_scale-cuda.json)"
"$PY" benchmarks/gpu_summary.py "$PARTS"/*.json --status "$STATUS" --tests "$PARTS/tests.log" --out "$OUT/llm_scale-cuda.json" 2>&1 | tee -a "$LOG"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || say "FAILED summary: exit code $rc; the parts are in $PARTS: $(ls "$PARTS" | tr '\n' ' ')"
failed=$(awk '$2 != 0 && $2 != "skipped"' "$STATUS" | wc -l)
say "done in $((SECONDS - T0))s; $failed section(s) failed; files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
exit $((failed > 0 || rc != 0))

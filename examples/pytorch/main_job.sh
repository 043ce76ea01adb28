#!/usr/bin/env bash
# The main job: for each model (the Fashion-MNIST MLP and ResNet-style CNN,
# the fortunes character Llama), `kiln precompile` runs the real 4-worker
# training command in graph-collection mode and compiles its graphs into a
# local cache; then the same command trains from that cache with zero
# compiles at train time. Prints the precompile reports, the training
# curves, the final test accuracy and the modelled trn1 figures.
#
#   examples/pytorch/main_job.sh <build dir> [work dir]
set -euo pipefail

BUILD="$(realpath "${1:?usage: main_job.sh <build dir> [work dir]}")"
WORK="${2:-$BUILD/main-job}"
HERE="$(cd "$(dirname "$0")" && pwd)"
PYTHON=/usr/bin/python3
WORKERS="${KILN_MAIN_JOB_WORKERS:-4}"

export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
export KILN_CACHE_URL="$WORK/cache"
export OMP_NUM_THREADS=1
rm -rf "$WORK"
mkdir -p "$WORK"

torchrun=("$PYTHON" -m kiln.torchrun --nproc_per_node "$WORKERS" --master_port "${MASTER_PORT:-29400}")

# run_model <name> <script> [args...]: precompile, then train from the cache.
run_model() {
  local name="$1" script="$2"; shift 2
  echo
  echo "=== $name: kiln precompile (graph collection with $WORKERS workers, then parallel compile)"
  "$BUILD/bin/kiln" precompile --no-progress --graphs "$WORK/$name-graphs" \
    --report "$WORK/$name-precompile.json" -- \
    "${torchrun[@]}" "$HERE/$script.py" "$@"
  echo
  echo "=== $name: training, $WORKERS data-parallel workers, from the cache"
  "${torchrun[@]}" "$HERE/$script.py" "$@" --summary "$WORK/$name.json" \
    --checkpoints "$WORK/$name-checkpoints" --logdir "$WORK/$name-tensorboard" 2>&1 |
    grep -v -e '^\*\*\*\*' -e 'OMP_NUM_THREADS'
}

run_model fashion_mnist fashion_mnist
run_model fashion_mnist_cnn fashion_mnist --model resnet --steps 800 --print-every 200
run_model fortunes_gpt fortunes_gpt

"$PYTHON" - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
# The character GPT of the same size, with plain AdamW and one batch of 8
# per worker and step, reached 2.304 nats/char in the same time.
GPT_GOAL = 2.304
# The CNN's goal: 91 % after its 800 steps (it reaches about 91.6-92 %).
CNN_GOAL = 0.91
mnist = json.load(open(f"{work}/fashion_mnist.json"))
cnn = json.load(open(f"{work}/fashion_mnist_cnn.json"))
gpt = json.load(open(f"{work}/fortunes_gpt.json"))
compiles = mnist["compiles"] + cnn["compiles"] + gpt["compiles"]
print()
print(f"main job: Fashion-MNIST test accuracy {100 * mnist['accuracy']:.2f}% with the MLP "
      f"(goal 85%), {100 * cnn['accuracy']:.2f}% with the CNN (goal {100 * CNN_GOAL:.0f}%); "
      f"fortunes held-out loss {gpt['held_out_loss']:.3f} nats/char "
      f"(goal below {GPT_GOAL}; frequencies alone {gpt['unigram_loss']:.3f}); compiles at "
      f"train time: {compiles}")
problems = []
if mnist["accuracy"] < 0.85:
    problems.append("Fashion-MNIST accuracy below 85%")
if cnn["accuracy"] < CNN_GOAL:
    problems.append(f"the CNN's Fashion-MNIST accuracy below {100 * CNN_GOAL:.0f}%")
if gpt["held_out_loss"] >= GPT_GOAL:
    problems.append(f"the language model's held-out loss is not below {GPT_GOAL}")
if compiles:
    problems.append(f"{compiles} graphs compiled at train time")
if problems:
    sys.exit("main job FAILED: " + "; ".join(problems))
print(f"main job: OK (TensorBoard: tensorboard --logdir {work})")
PY

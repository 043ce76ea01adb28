"""A tensor-parallel worker: the Llama-style model of models.py sharded
over tensor-parallel groups of --tp workers (kiln.parallel.parallelize),
the job's other dimension data-parallel, trained on one synthetic token
stream; or, with --eager, the whole model trained by eager PyTorch on the
whole global batch in one process (the reference).

    python3 -m kiln.torchrun --nproc_per_node 4 train_tp.py --tp 2 --out r.json
    python3 train_tp.py --eager --out e.json

Rank 0 writes the losses (and the gathered final parameters' checksum) as
JSON. `--save-at U --checkpoint c.pt` saves after update U (every rank
gathers the shards, rank 0 writes); `--resume c.pt` starts from it.
"""

import argparse
import json

import torch

import kiln
from models import LlamaLM, llama_tp_plan, lm_loss, seed_dropouts

parser = argparse.ArgumentParser()
parser.add_argument("--tp", type=int, default=1)
parser.add_argument("--eager", action="store_true")
parser.add_argument("--batch", type=int, default=8, help="global batch")
parser.add_argument("--updates", type=int, default=20)
parser.add_argument("--zero-stage", type=int, default=0)
parser.add_argument("--clip", type=float, default=0.0)
parser.add_argument("--accumulate", type=int, default=1, help="micro-batches per update")
parser.add_argument("--save-at", type=int, default=0)
parser.add_argument("--checkpoint")
parser.add_argument("--resume")
parser.add_argument("--kv-heads", type=int, default=4)
parser.add_argument("--activation-checkpointing", action="store_true",
                    help="every layer under torch.utils.checkpoint")
parser.add_argument("--dropout", type=float, default=0.0,
                    help="dropout of the attention's probabilities and the residual branches")
parser.add_argument("--shards", type=int, default=1,
                    help="with --eager and --dropout: draw the masks a tensor-parallel group "
                         "of this many workers draws (one replica)")
parser.add_argument("--out", required=True)
args = parser.parse_args()

VOCAB, SEQ = 64, 12
torch.manual_seed(1234)
model = LlamaLM(vocab=VOCAB, hidden=32, heads=4, kv_heads=args.kv_heads, ffn=48, layers=2,
                seq=SEQ, checkpoint=args.activation_checkpointing, dropout=args.dropout)

generator = torch.Generator().manual_seed(7)
stream = torch.randint(0, VOCAB, (args.batch * 64, SEQ + 1), generator=generator)


def global_batch(u):
    rows = stream[(u * args.batch) % len(stream):][:args.batch]
    return rows[:, :-1], rows[:, 1:]


def optimizer_state_checksum(state):
    return sum(float(t.double().abs().sum()) for t in state.values())


if args.eager:
    micro = [0]  # micro-steps run, which number the compiled step's seeds
    if args.dropout:
        seed_dropouts(model, lambda: kiln.distributed.worker_seed(0, 0, micro[0]),
                      global_batch(0)[0], shards=args.shards)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    start = 0
    if args.resume:
        saved = torch.load(args.resume)
        model.load_state_dict({n: saved["state"][n] for n in model.state_dict()
                               if n in saved["state"]}, strict=False)
        start = saved["steps"]
        # The eager optimizer's moments from the checkpoint.
        for group in optimizer.param_groups:
            for n, p in model.named_parameters():
                optimizer.state[p] = {
                    "step": torch.tensor(float(start)),
                    "exp_avg": saved["state"][f"{n}.exp_avg"].clone(),
                    "exp_avg_sq": saved["state"][f"{n}.exp_avg_sq"].clone()}
    micro[0] = start * args.accumulate
    losses, norms = [], []
    for u in range(start, start + args.updates):
        optimizer.zero_grad()
        for j in range(args.accumulate):
            ids, targets = global_batch(u * args.accumulate + j)
            micro[0] += 1
            loss = lm_loss(model(ids), targets)
            (loss / args.accumulate).backward()
            losses.append(float(loss))
        if args.clip:
            norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(),
                                                              args.clip)))
        optimizer.step()
    with open(args.out, "w") as f:
        json.dump({"losses": losses, "grad_norms": norms}, f)
    raise SystemExit(0)

kiln.parallel.initialize(tensor_parallel=args.tp)
kiln.parallel.parallelize(model, llama_tp_plan())
replicas = kiln.parallel.data_parallel_size()
rank = kiln.parallel.data_parallel_rank()
step = kiln.compile_step(model, lambda logits, targets: kiln.parallel.parallel_cross_entropy(
                             logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)),
                         kiln.optim.AdamW(lr=1e-2), zero_stage=args.zero_stage,
                         max_grad_norm=args.clip or None,
                         accumulation_steps=args.accumulate, name="llama_tp")
first = 0
if args.resume:
    saved = torch.load(args.resume)
    step.load_checkpoint_state(saved)
    first = saved["steps"]

losses, norms = [], []
per_replica = args.batch // replicas
mine = slice(rank * per_replica, (rank + 1) * per_replica)
for u in range(first, first + args.updates):
    for j in range(args.accumulate):
        ids, targets = global_batch(u * args.accumulate + j)
        losses.append(float(step(ids[mine], targets[mine])))
    if args.clip:
        norms.append(step.metrics["grad_norm"])
    if kiln.collecting():
        raise SystemExit(0)  # kiln precompile: the graph is recorded
    if args.save_at and u + 1 == args.save_at:
        state = step.checkpoint_state()  # every rank: it gathers the shards
        if kiln.distributed.world().rank == 0:
            torch.save(state, args.checkpoint)

final = step.state_dict()
if kiln.distributed.world().rank == 0:
    with open(args.out, "w") as f:
        json.dump({"losses": losses, "grad_norms": norms, "compiles": step.cache_stats().get("compiles", 0),
                   "shapes": {n: list(t.shape) for n, t in final.items()},
                   "hbm": step.hbm_bytes}, f)

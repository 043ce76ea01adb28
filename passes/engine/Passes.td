//===- Passes.td - the engine phase (ktile -> kisa) ------------------------===//

#ifndef KILN_PASSES_ENGINE_PASSES_TD
#define KILN_PASSES_ENGINE_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertKTileToKisa : Pass<"convert-ktile-to-kisa", "mlir::ModuleOp"> {
  let summary = "Engines, DMA queues, a schedule and semaphores: a kisa program";
  let description = [{
    Turns each planned ktile function (run `ktile-plan-memory` first) into a
    `kisa.program`, in five steps:

    1. **Binding**: every access pattern gets its buffer's address. A
       transfer of 256 KiB or more is cut along its partitions (whole
       groups of 32) into up to four pieces of at least 128 KiB, which step 3 may put on different
       queues: one queue would take ~75 us for a 2 MiB tile that a matmul
       on the critical path waits for. Step 3 also makes a second schedule
       in which, where the pieces would not run side by side (every other
       free queue has other transfers about as urgent to take), the ready
       pieces after the one it places go back into it (one transfer, one
       fixed cost), and keeps whichever schedule ends sooner.
    2. **Dependencies**: every pair of instructions that touch overlapping
       bytes with at least one write (RAW, WAR, WAW), found per memory
       granule; an access covered within a granule by a later write is
       retired, so the graph stays linear in practice. On-chip regions are
       partitions times bytes; in HBM, a pattern whose rows fit one pitch is
       a box of those rows, so the tiles of a row-major tensor side by side
       do not count as overlapping (their stores would otherwise be one
       chain).
    3. **Engine assignment and list scheduling**: instructions are taken
       in order of their longest path to the end of the step (the target's
       timing model gives each instruction's time), each placed on the
       engine that can start it earliest among those that run it: matmul and
       transpose on TensorE, activations on ScalarE, elementwise and
       reductions on VectorE (or GpSimd when everything is in SBUF),
       floating-point `tensor_scalar`s on ScalarE as well, copies on
       VectorE or ScalarE, index generation on GpSimd, loads, stores and
       collectives on the DMA queue that frees up first. Buffers that the
       memory plan rotated give the consecutive tile iterations different
       buffers, so the schedule overlaps the loads of one with the compute
       of the last: double buffering.
    4. **Semaphores**: one per stream, counting the instructions of that
       stream that another stream waits for. An instruction waits only for
       what no earlier wait on its stream already implies (vector clocks give
       the transitive knowledge), so every cross-engine dependency is covered
       and no wait is redundant. More than four waits move to the
       stream's previous instruction when that cannot deadlock.
    5. **Program**: HBM buffers for the arguments (inout when a result is
       written in place), results and constants, then the instructions in
       schedule order.
  }];
  let dependentDialects = ["::kiln::kisa::KisaDialect"];
  let options = [
    Option<"worldSize", "world-size", "int", "1",
           "Workers of the data-parallel group (collective timing)">,
    Option<"schedule", "schedule", "bool", "true",
           "List-schedule; off keeps program order (for debugging)">,
  ];
}

#endif // KILN_PASSES_ENGINE_PASSES_TD

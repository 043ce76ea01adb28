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
       of the last: double buffering. The schedule gives the ports that
       engines share (VectorE and GpSimd the SBUF one, VectorE and ScalarE
       the PSUM one on trn1) to its most urgent instructions; the machine
       would give a port to whichever engine's next instruction is ready
       first, so each holder of a shared port depends on the holder the
       schedule put before it on another engine, and the program runs as
       scheduled (without, the BERT-base step ran 0.5 ms behind its
       schedule: VectorE's reductions took the port from GpSimd's chain).
    4. **Semaphores**: one per stream, counting the instructions of that
       stream that another stream waits for. An instruction waits only for
       what no earlier wait on its stream already implies (vector clocks give
       the transitive knowledge), so every cross-engine dependency is covered
       and no wait is redundant. An instruction waits on at most four
       semaphores: its waits beyond four, the producers done soonest first,
       go to the latest earlier instruction of its stream that the schedule
       starts after the producer is done (it cannot deadlock: the schedule
       already ran the producer first), and only when none does, to a
       carrier just before it (on a DMA queue a carrier is a transfer, 2 us
       of the queue).
    5. **Program**: HBM buffers for the arguments (inout when a result is
       written in place), results and constants, then the instructions in
       schedule order.
  }];
  let dependentDialects = ["::kiln::kisa::KisaDialect"];
  let options = [
    Option<"worldSize", "world-size", "int", "1",
           "Workers of the data-parallel group (collective timing)">,
    Option<"tensorParallel", "tensor-parallel", "int", "1",
           "Workers of the tensor-parallel group (collective timing)">,
    Option<"schedule", "schedule", "bool", "true",
           "List-schedule; off keeps program order (for debugging)">,
  ];
}

#endif // KILN_PASSES_ENGINE_PASSES_TD
